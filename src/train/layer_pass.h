// One transformer layer of the trainer (llama, qwen2, qwen3 dense layers), forward with saved
// activations and backward into the LoRA gradients, as keel's inference pass computes it
// (model/context.cpp): RMSNorm → Q/K/V (+ biases, + qwen3's per-head QK RMSNorm) → RoPE → causal
// grouped-query attention → O → residual; RMSNorm → gate, up → SiLU(gate)·up → down → residual.
// Each adapted projection adds scale·B·(A·x) (lora_params.h); the frozen weights' own gradients
// are never formed, only the input gradients through them.
//
// Invariants: a LayerActivations is filled by layer_forward for one sequence of `n` tokens at
// positions 0..n-1 and read by layer_backward for the same layer, weights and parameters.
// Thread safety: call from the pool's owner thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"
#include "model/model.h"
#include "train/dense_ops.h"
#include "train/frozen_weights.h"
#include "train/lora_params.h"

namespace keel::train {

// What a layer's passes share for one sequence. Pointers are borrowed for the pass.
template <typename T>
struct LayerPassContext {
  const model::Model* model = nullptr;
  const LoraLayout* layout = nullptr;
  const T* params = nullptr;  // [layout->num_params]
  T* grads = nullptr;         // [layout->num_params], added to by backward
  ThreadPool* pool = nullptr;
  const RopeTable* rope = nullptr;  // of positions 0..n-1
  int64_t n = 0;                    // tokens of the sequence
  // Set: the products over frozen weights wait while it pauses and give up early once it stops
  // (dense_ops.h); the caller then drops the layer's results. Null: never.
  const TrainGate* gate = nullptr;
};

// What the backward pass needs of a layer's forward ([n][width] rows).
template <typename T>
struct LayerActivations {
  std::vector<T> x, inv_rms1, h1;             // input residual, its norm, normed input
  std::vector<T> q_raw, k_raw, inv_q, inv_k;  // qwen3: Q/K before the per-head norm
  std::vector<T> q, k, v;                     // as attention read them (after RoPE)
  std::vector<T> lse, attn;                   // attention's log-sum-exp [n_head][n], output
  std::vector<T> x1, inv_rms2, h2;            // after attention's residual, its norm
  std::vector<T> gate, up, act;               // FFN: act = SiLU(gate)·up
  std::array<std::vector<T>, model::kNumLoraTargets> lora_u;  // A·input [n][rank] per target
};

// x [n][n_embd] → x_out [n][n_embd], filling `a`.
template <typename T>
void layer_forward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w, const T* x,
                   LayerActivations<T>* a, T* x_out);

// dx: on entry ∂loss/∂x_out [n][n_embd]; on return ∂loss/∂x. Adds the layer's LoRA gradients
// into c.grads.
template <typename T>
void layer_backward(const LayerPassContext<T>& c, int64_t il, const DenseLayer<T>& w,
                    const LayerActivations<T>& a, std::vector<T>* dx);

}  // namespace keel::train
