// Loading a model to run: the GGUF read into memory (or mapped, ComputeOptions::use_mmap), its
// tokenizer, and the model (quantized weights regrouped into the row-group layout unless
// ComputeOptions::weight_layout is "rows"). Progress is reported through a callback, so a CLI can
// draw a bar and a task executor can report it elsewhere.
//
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "core/result.h"
#include "gguf/reader.h"
#include "host/compute.h"
#include "model/expert_shard.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::host {

// Bytes read so far of the total; may be empty.
using ReadProgress = std::function<void(uint64_t done, uint64_t total)>;

struct LoadedModel {
  std::string path;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  bool random_weights = false;  // keel.random_weights is set (make-model / the default model)
  double load_seconds = 0.0;
};

// Whether the file says its weights are random (keel.random_weights: make-model, the default
// model): its text is noise.
[[nodiscard]] bool has_random_weights(const gguf::GgufFile& file);

// The GGUF at `path` with its tensor bytes read into memory, or mapped with `use_mmap`.
// A sharded load (`shard` not whole(), read mode) reads only the bytes the shard keeps
// (model/expert_shard.h).
Result<gguf::GgufFile> read_weights(const std::string& path, bool use_mmap,
                                    const ReadProgress& progress,
                                    const model::ExpertShard& shard = {});

// The model at `path` (model::ModelOptions from `options`, its group_weights from `compute`).
Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options,
                               const ReadProgress& progress = {});

}  // namespace keel::host
