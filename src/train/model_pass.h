// ModelPass: the trainer's pass over one sequence — token embeddings, every layer (layer_pass.h),
// the final RMSNorm, the output head and the cross-entropy of the trained targets — forward and,
// when gradients are wanted, backward into the LoRA parameters. Logits are formed only for the
// positions whose next token is trained (the head is the largest matmul of a small model).
//
// Activation checkpointing (per layer): with `checkpoint_layers` the forward keeps only each
// layer's input and the backward recomputes that layer's activations just before its backward,
// so activation memory is one layer's plus n_layer residuals instead of every layer's.
//
// Stopping and pausing: with set_gate(), run() asks the gate (train_gate.h) before each layer's
// forward and backward (and the head) and returns Cancelled once it says stop, and the products
// over frozen weights ask it per row, giving up early on a stop and waiting out a pause
// (dense_ops.h) — so a pass yields within a fraction of one matmul (attention itself is not cut
// short).
//
// Thread safety: one owner; the pool is borrowed and used from the owner's thread; the stop flag
// may be set from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "train/frozen_weights.h"
#include "train/layer_pass.h"
#include "train/lora_params.h"

namespace keel::train {

// One training sequence: tokens at positions 0..n-1, and which of them are trained targets.
struct TrainSequence {
  std::vector<int32_t> tokens;  // [n], each in [0, n_vocab)
  std::vector<uint8_t> target;  // [n]: 1 = tokens[t] is predicted from tokens[0..t) and trained;
                                // target[0] is always 0
  [[nodiscard]] int64_t num_targets() const;
};

struct SequenceLoss {
  double loss_sum = 0.0;    // Σ −ln p(target) over the trained targets
  int64_t num_targets = 0;  // trained targets of the sequence
  int64_t num_correct = 0;  // targets that are the argmax of their logits
};

template <typename T>
class ModelPass {
 public:
  // `model` and `layout` are borrowed for the pass's life; the model's architecture must have a
  // backward here (make_lora_layout checked it).
  ModelPass(const model::Model& model, const LoraLayout& layout, ThreadPool& pool,
            bool checkpoint_layers = false);

  // The loss of `seq` under `params`. With `grads` non-null, also adds
  // loss_weight · ∂loss_sum/∂params into it. InvalidArgument for a sequence the model cannot
  // take (empty, longer than its context, a token out of range, a mask of another length).
  Result<SequenceLoss> run(const TrainSequence& seq, const T* params, T* grads,
                           double loss_weight = 1.0);
  // From now on run() waits while the gate pauses and returns Cancelled once it stops (null:
  // never); `gate` is borrowed.
  void set_gate(const TrainGate* gate) { gate_ = gate; }

 private:
  Status validate(const TrainSequence& seq) const;
  // Cancelled when the gate says stop (after waiting out a pause).
  [[nodiscard]] Status poll_stop() const;
  // Final norm, head and cross-entropy of the trained positions; with `dx` also the gradient of
  // loss_weight · loss_sum with respect to the last residual, into dx.
  SequenceLoss head(const TrainSequence& seq, const std::vector<T>& x, double loss_weight,
                    std::vector<T>* dx);

  const model::Model& model_;
  const LoraLayout& layout_;
  ThreadPool& pool_;
  bool checkpoint_;
  const TrainGate* gate_ = nullptr;
  FrozenWeights<T> weights_;
  std::vector<LayerActivations<T>> acts_;  // [n_layer], or [1] scratch when checkpointing
  std::vector<std::vector<T>> inputs_;     // [n_layer] residual inputs when checkpointing
};

}  // namespace keel::train
