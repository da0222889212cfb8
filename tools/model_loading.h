// Loading what a command serves: the GGUF (read into memory by default, or mapped), its tokenizer
// and the model, with a progress bar on a terminal; the built-in default model when no path is
// given. Shared by `keel run` and `keel serve`.
#pragma once

#include <memory>
#include <string>

#include "commands.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "gguf/reader.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace keel::cli {

struct LoadedModel {
  std::string path;
  std::unique_ptr<model::Model> model;
  std::unique_ptr<tokenizer::Tokenizer> tokenizer;
  bool random_weights = false;  // keel.random_weights is set (make-model / the default model)
  double load_seconds = 0.0;
};

// The GGUF at `path` with its tensor bytes read into memory (or mapped with --mmap); with
// `show_progress`, a progress bar on a terminal or progress lines otherwise.
Result<gguf::GgufFile> read_weights(const std::string& path, const ComputeOptions& compute,
                                    bool show_progress);

// `path` "" → the built-in default model (created on first use with `pool`).
Result<LoadedModel> load_model(const std::string& path, const ComputeOptions& compute,
                               const model::ModelOptions& options, ThreadPool& pool);

}  // namespace keel::cli
