// Model: a loaded Llama-family model — the GgufFile it came from (owned), its hyper-parameters
// and views of its weights. The forward pass lives in Context (context.h); the KV memory in
// KvStorage (kv_storage.h). A Model is immutable after load() and may be shared by several
// Contexts.
//
// Invariants: weights() views point into file()'s bytes (quantized matrices rewritten into the
// row-group layout at load unless ModelOptions::group_weights is off, or already in it when the
// file lists them as grouped — a model store entry, model/group_weights.h), and
// hparams().rope.freq_factors points into weights().rope_freqs (or is null); both live as long as
// the Model, which is never moved (it is handed out as a unique_ptr). A sharded model
// (ModelOptions::expert_shard) has empty views for what its shard does not keep. Thread safety: all
// methods are const and safe from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/result.h"
#include "gguf/reader.h"
#include "model/expert_shard.h"
#include "model/hparams.h"
#include "model/weights.h"

namespace keel::model {

struct ModelOptions {
  // Maximum sequence length (positions are < n_ctx); 0 = the model's training context
  // (n_ctx_train). The CLI exposes it as --ctx-size.
  int64_t n_ctx = 0;
  // Rewrite the quantized matrices into the row-group layout at load (kernels/weight_layout.h),
  // the layout the decode kernels stream fastest. Only for tensor bytes read into memory
  // (DataMode::kRead); a mapped file keeps the GGUF layout. The CLI's --weight-layout rows
  // turns it off (for comparisons).
  bool group_weights = true;
  // The experts this process holds, for expert parallelism (model/expert_shard.h); the default
  // holds the whole model. Anything else needs an MoE model. Model::open with DataMode::kRead
  // then reads only the kept tensor bytes; either way the views of the rest are emptied.
  ExpertShard expert_shard;

  [[nodiscard]] Status validate() const;
};

class Model {
 public:
  // Takes ownership of `file` (opened with DataMode::kRead or kMmap), reads the hyper-parameters
  // and validates every tensor's presence, shape and type.
  static Result<std::unique_ptr<Model>> load(gguf::GgufFile file, const ModelOptions& options = {});
  // Opens `path` with `mode` and loads it.
  static Result<std::unique_ptr<Model>> open(const std::string& path,
                                             const ModelOptions& options = {},
                                             gguf::DataMode mode = gguf::DataMode::kRead);

  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  [[nodiscard]] const HParams& hparams() const { return hparams_; }
  [[nodiscard]] const Weights& weights() const { return weights_; }
  [[nodiscard]] const gguf::GgufFile& file() const { return file_; }
  // Maximum sequence length: options.n_ctx, or n_ctx_train when that was 0.
  [[nodiscard]] int64_t n_ctx() const { return n_ctx_; }
  // The experts this model holds (ModelOptions::expert_shard): the views of the others, and with
  // experts_only of every non-expert matrix, are empty (data null, rows 0).
  [[nodiscard]] const ExpertShard& expert_shard() const { return expert_shard_; }

 private:
  explicit Model(gguf::GgufFile file) : file_(std::move(file)) {}

  gguf::GgufFile file_;
  HParams hparams_;
  Weights weights_;
  int64_t n_ctx_ = 0;
  ExpertShard expert_shard_;
};

}  // namespace keel::model
