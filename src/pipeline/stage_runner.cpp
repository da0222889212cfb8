// StageRunner: a later stage's layers, KV and pool (see stage_runner.h).
#include "pipeline/stage_runner.h"

#include <string>

#include "model/kv_type.h"

namespace keel::pipeline {

Result<std::unique_ptr<StageRunner>> StageRunner::create(const model::Model& model,
                                                         const StageSpec& spec, kernels::Isa isa,
                                                         int threads) {
  const int64_t n_layer = model.hparams().n_layer;
  if (spec.first_layer < 1 || spec.first_layer >= n_layer) {
    return Status::invalid_argument("pipeline stage: first layer " +
                                    std::to_string(spec.first_layer) + " is outside [1, " +
                                    std::to_string(n_layer) + ")");
  }
  if (spec.num_blocks < 1 || spec.max_batch_tokens < 1 || !model::is_kv_type(spec.kv_dtype)) {
    return Status::invalid_argument("pipeline stage: bad KV pool or batch size");
  }
  model::KvLayout layout =
      model::KvLayout::for_model(model.hparams(), spec.block_size, spec.kv_dtype);
  layout.n_layer = n_layer - spec.first_layer;
  KEEL_ASSIGN_OR_RETURN(model::KvStorage kv, model::KvStorage::create(layout, spec.num_blocks));
  return std::unique_ptr<StageRunner>(
      new StageRunner(model, spec, std::move(kv), isa, threads < 1 ? 1 : threads));
}

StageRunner::StageRunner(const model::Model& model, const StageSpec& spec, model::KvStorage kv,
                         kernels::Isa isa, int threads)
    : spec_(spec),
      kv_(std::move(kv)),
      pool_(threads),
      ops_(isa, &pool_),
      ctx_(model, spec.max_batch_tokens, model::LayerRange{spec.first_layer, -1}) {}

Status StageRunner::run(std::span<const engine::BlockCopy> copies, const model::Batch& batch,
                        std::span<const float> residual, std::vector<float>* logits) {
  for (const engine::BlockCopy& c : copies) {
    if (c.first < 0 || c.first >= spec_.num_blocks || c.second < 0 ||
        c.second >= spec_.num_blocks) {
      return Status::invalid_argument("pipeline stage: block copy outside the pool");
    }
  }
  for (const engine::BlockCopy& c : copies) kv_.copy_block(c.first, c.second);
  logits->clear();
  if (batch.empty()) return Status();
  return ctx_.forward_stage_from(batch, residual, kv_, ops_, logits, nullptr);
}

}  // namespace keel::pipeline
