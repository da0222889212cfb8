// finetune: the training loop of a LoRA adapter — epochs over the examples in a seeded order,
// gradient accumulation to batch_size sequences per optimizer step (the loss of a step is the
// mean over the trained targets of its sequences), AdamW (adamw.h), validation after each epoch,
// a progress callback per step. Seeded and deterministic: the same data, config and seed give the
// same per-step losses and the same adapter bits whatever the thread count (every reduction of
// the passes and the optimizer runs in a fixed order).
//
// Per-layer activation checkpointing is available (`checkpoint_layers`). Stopping and resuming
// (FinetuneControl): a stop flag polled between layers, sequences and steps ends the run at the
// last step boundary with its TrainState (train_state.h); a run started from that state takes the
// remaining steps exactly as an undisturbed run would (same per-step losses, same bits); each
// epoch's end hands its state to on_checkpoint.
// Thread safety: one call at a time per pool; the callbacks run on the caller's thread; the stop
// flag may be set from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "train/adamw.h"
#include "train/lora_params.h"
#include "train/model_pass.h"
#include "train/train_state.h"

namespace keel::train {

struct FinetuneConfig {
  LoraConfig lora;
  OptimizerConfig optimizer;
  int32_t epochs = 3;              // ≥ 1
  int32_t batch_size = 1;          // sequences per optimizer step, ≥ 1
  uint64_t seed = 1;               // the initial A and the order of the examples
  bool checkpoint_layers = false;  // recompute each layer's activations in the backward

  [[nodiscard]] Status validate() const;
};

// One optimizer step, as the progress line shows it.
struct StepReport {
  int64_t step = 0;  // 1-based
  int64_t total_steps = 0;
  int32_t epoch = 0;      // 1-based
  double loss = 0.0;      // mean over the step's trained targets
  double accuracy = 0.0;  // share of those targets that were the argmax
  double learning_rate = 0.0;
  double grad_norm = 0.0;      // before clipping
  int64_t trained_tokens = 0;  // tokens through the forward pass so far
  double elapsed_s = 0.0;
};

struct EpochReport {
  int32_t epoch = 0;
  double train_loss = 0.0;   // mean over the epoch's trained targets (during training)
  double valid_loss = -1.0;  // mean over the validation targets after the epoch; −1 without
  double valid_accuracy = 0.0;
};

struct FinetuneProgress {
  std::function<void(const StepReport&)> on_step;    // may be empty
  std::function<void(const EpochReport&)> on_epoch;  // may be empty
};

// Stopping, resuming and checkpoints (each part may be left empty).
struct FinetuneControl {
  // Polled between layers, sequences and steps; once true, finetune() returns with `stopped`
  // and the state of the last finished step (the step in progress is dropped, to be taken again).
  const std::atomic<bool>* stop = nullptr;
  // While true, the trainer waits (between layers and inside its products, train_gate.h): set
  // while interactive requests run beside it. Null: never.
  const std::atomic<bool>* pause = nullptr;
  // Continue from this state (an earlier run's, with the same base, data and config) instead of
  // the start; InvalidArgument when it does not fit them.
  const TrainState* resume = nullptr;
  // At each epoch's end, after on_epoch: the state there (cursor at the next epoch) and the
  // epoch's report. An error stops the run with that error.
  std::function<Status(const TrainState&, const EpochReport&)> on_checkpoint;
};

struct FinetuneResult {
  LoraLayout layout;
  std::vector<float> params;        // [layout.num_params]
  std::vector<double> step_losses;  // per step taken by this call
  bool stopped = false;             // the stop flag ended the run early
  TrainState state;                 // where the run stands: the last finished step, or the end
  int64_t steps = 0;                // optimizer steps taken in all (a resumed run's included)
  int64_t trained_tokens = 0;
  double first_loss = 0.0;   // of this call's first step (0 when it took none)
  double last_loss = 0.0;    // of its last step
  double valid_loss = -1.0;  // after the last epoch; −1 without validation data
};

// The optimizer steps a run takes.
int64_t total_steps(size_t num_examples, const FinetuneConfig& config);

// Trains an adapter for `base` on `train` (and measures `valid`, which may be empty).
// InvalidArgument for a bad config, no examples, a sequence the model cannot take, or a resume
// state that does not fit. A stop is not an error: the result says `stopped`.
Result<FinetuneResult> finetune(const model::Model& base, std::span<const TrainSequence> train,
                                std::span<const TrainSequence> valid, const FinetuneConfig& config,
                                ThreadPool& pool, const FinetuneProgress& progress = {},
                                const FinetuneControl& control = {});

// Σ loss and targets of `seqs` under `params` (no gradients).
Result<SequenceLoss> evaluate_loss(ModelPass<float>& pass, std::span<const TrainSequence> seqs,
                                   const std::vector<float>& params);

}  // namespace keel::train
