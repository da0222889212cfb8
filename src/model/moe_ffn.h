// MoeFfn: the mixture-of-experts FFN of one layer over a batch of normalised rows, as llama.cpp's
// build_moe_ffn computes it (MoeParams in hparams.h): router logits, softmax, top-k, optional
// renormalisation, the chosen experts' SwiGLU FFNs, their outputs summed with the weights in
// selection order (+ qwen2moe's sigmoid-gated shared expert).
//
// forward() is the grouped path (llama.cpp's mul_mat_id idea): the batch's (token, expert) pairs
// are bucketed per expert, each active expert's rows are gathered and multiplied in one call per
// weight matrix — one pass over that expert's weights for the whole step — and the results
// scattered back; experts no token chose are never read, so decode reads only the active
// experts' weights. forward_naive() is the reference: token by token, expert by expert, with the
// same kernels; both sum the expert outputs in the same order, so they agree up to the kernels'
// per-row results (bit for bit where a kernel's row does not depend on the batch around it).
//
// Thread safety: one MoeFfn per Context (engine thread); the kernels parallelise through Ops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/kernels.h"
#include "model/hparams.h"
#include "model/moe_weights.h"

namespace keel::model {

// Top-k routing from router logits (`logits` [n][n_expert]): per token the n_expert_used experts
// of largest softmax probability, largest first (ties: the lower index first), into experts
// [n][k] and their weights [n][k] (the probabilities, divided by their sum when
// p.norm_weights). Pure; no allocation beyond a small per-call buffer.
void route_tokens(const MoeParams& p, const float* logits, int64_t n, int32_t* experts,
                  float* weights);

class MoeFfn {
 public:
  // Scratch for batches of up to max_tokens rows. hp.is_moe() must hold.
  MoeFfn(const HParams& hp, int64_t max_tokens);

  // out[t] = Σ_j weight[t][j] · expert_{e[t][j]}(xn[t]) (+ the shared expert) for t < n
  // (≤ max_tokens). xn, out: [n][n_embd]; out is overwritten and may not alias xn.
  void forward(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops, float* out);
  // The same result, one token and one chosen expert at a time (the reference loop).
  void forward_naive(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                     float* out);

  // The routing of the last call: experts [n][n_expert_used] and their weights.
  [[nodiscard]] std::span<const int32_t> experts(int64_t n) const {
    return {sel_.data(), static_cast<size_t>(n * k_)};
  }
  [[nodiscard]] std::span<const float> weights(int64_t n) const {
    return {wts_.data(), static_cast<size_t>(n * k_)};
  }

 private:
  void route(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops);
  // One token (decode): the k chosen experts' outputs into ys_, gate/up paired per call.
  void forward_one(const MoeWeights& w, const float* xn, kernels::Ops& ops);
  // Runs expert e over rows x [m][n_embd] into y [m][n_embd].
  void run_expert(const MoeWeights& w, int64_t e, const float* x, int64_t m, kernels::Ops& ops,
                  float* y);
  // out[t] = Σ_j wts_[t][j] · ys_[t][j] (+ shared expert) in selection order.
  void combine(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops, float* out);

  MoeParams p_;
  int64_t d_;  // n_embd
  int64_t k_;  // n_expert_used
  int64_t max_tokens_;
  std::vector<float> logits_;     // [T][n_expert]
  std::vector<int32_t> sel_;      // [T][k] chosen experts
  std::vector<float> wts_;        // [T][k] their weights
  std::vector<float> ys_;         // [T][k][n_embd] expert outputs, per (token, slot)
  std::vector<int32_t> offsets_;  // [n_expert + 1] bucket starts in order_
  std::vector<int32_t> fill_;     // [n_expert] next free place per bucket
  std::vector<int32_t> order_;    // [T·k] slots (t·k + j) grouped by expert
  std::vector<float> xg_;         // [T][n_embd] one expert's gathered rows
  std::vector<float> yg_;         // [T][n_embd] its outputs
  std::vector<float> gate_, up_;  // [T][max(n_ff_exp, n_ff_shexp)]
};

}  // namespace keel::model
