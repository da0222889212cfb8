// StageRunner: a later pipeline stage's compute — layers [first_layer, n_layer) of a model, a KV
// storage of only those layers with stage 0's block count (stage 0's block ids index it), a
// Context and a thread pool. run() mirrors the step's copy-on-write copies, then runs the batch
// from stage 0's residual through the layers and the head. LocalStage is the same runner behind
// engine::PipelineTail in the engine's own process (tests); StageServer puts it behind a link.
//
// Thread safety: one caller at a time (run() is not reentrant); the Model must outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "core/thread_pool.h"
#include "engine/pipeline_tail.h"
#include "kernels/kernels.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::pipeline {

// What stage 0 tells a later stage (the hello): the split and the KV pool's shape.
struct StageSpec {
  int64_t first_layer = 0;          // the stage owns [first_layer, n_layer); in [1, n_layer)
  int32_t num_blocks = 0;           // stage 0's KV pool size in blocks (≥ 1)
  int32_t block_size = 16;          // positions per block
  DType kv_dtype = DType::kF32;     // as stage 0's
  int64_t max_batch_tokens = 2048;  // the largest batch a step carries (≥ 1)
};

class StageRunner {
 public:
  // InvalidArgument for a spec that does not fit the model; ResourceExhausted when the KV
  // storage cannot be allocated.
  static Result<std::unique_ptr<StageRunner>> create(const model::Model& model,
                                                     const StageSpec& spec, kernels::Isa isa,
                                                     int threads);

  [[nodiscard]] const StageSpec& spec() const { return spec_; }
  // Applies `copies` (each id in [0, num_blocks), else InvalidArgument and nothing changes),
  // then — for a non-empty batch — runs it from `residual` and replaces *logits with its rows
  // (empty for an empty batch). Errors of model::Context::forward_stage_from.
  Status run(std::span<const engine::BlockCopy> copies, const model::Batch& batch,
             std::span<const float> residual, std::vector<float>* logits);

 private:
  StageRunner(const model::Model& model, const StageSpec& spec, model::KvStorage kv,
              kernels::Isa isa, int threads);

  StageSpec spec_;
  model::KvStorage kv_;
  ThreadPool pool_;
  kernels::Ops ops_;
  model::Context ctx_;
};

// An in-process tail: the runner's layers behind engine::PipelineTail.
class LocalStage final : public engine::PipelineTail {
 public:
  explicit LocalStage(std::unique_ptr<StageRunner> runner) : runner_(std::move(runner)) {}
  [[nodiscard]] int64_t first_layer() const override { return runner_->spec().first_layer; }
  Status run(const engine::PipelineStep& step, std::vector<float>* logits) override {
    return runner_->run(step.block_copies, *step.batch, step.residual, logits);
  }

 private:
  std::unique_ptr<StageRunner> runner_;
};

}  // namespace keel::pipeline
