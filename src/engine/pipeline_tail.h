// PipelineTail: the stages after stage 0 of a pipeline-parallel engine (FlowServe's layout: one
// scheduler, at stage 0). Stage 0's StepExecutor runs layers [0, first_layer()) over the step's
// batch and hands the residual rows, with the batch (positions, sequences, block tables — stage 0's
// block ids, which the later stages' KV storages use as their own) and the copy-on-write block
// copies the engine made since the last step, to run(); the tail runs the remaining layers and
// the head and returns the logits rows. Later stages keep no per-sequence state: a block's K/V
// rows live at the same id on every stage, so freeing a sequence or a block needs no message;
// only copies (which move K/V between ids) are mirrored, in order, before the step that follows.
//
// Implementations: pipeline::RemoteStage (a stage-1 process over a cluster link) and
// pipeline::LocalStage (in-process, for tests). Thread safety: run() from the executor thread only.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "model/batch.h"

namespace keel::engine {

using BlockCopy = std::pair<int32_t, int32_t>;  // {src block, dst block}

struct PipelineStep {
  const model::Batch* batch = nullptr;      // borrowed for the call; may be empty (copies only)
  std::span<const float> residual;          // [batch->size()][n_embd] after stage 0's last layer
  std::span<const BlockCopy> block_copies;  // applied, in order, before the batch runs
};

class PipelineTail {
 public:
  virtual ~PipelineTail() = default;
  // The first layer the tail owns (stage 0 owns [0, first_layer())); constant.
  [[nodiscard]] virtual int64_t first_layer() const = 0;
  // Runs the step through the remaining stages and replaces *logits with [n_outputs][n_vocab]
  // floats (rows of the tokens with logits = 1, in batch order; empty for a copies-only step).
  // Any failure — a stage gone, a timeout, a refused batch — is an error for this step.
  virtual Status run(const PipelineStep& step, std::vector<float>* logits) = 0;
};

}  // namespace keel::engine
