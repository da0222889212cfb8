// DraftHead: an EAGLE-like draft head — a small network that continues the target model's own
// last hidden state by one token, and the drafting loop that feeds its predicted features back.
// Architecture (d = the target's n_embd, H = hidden units; docs/speculative.md):
//   f   the target's final hidden state after the output norm at position i (the row its LM head
//       multiplies; model::Context::forward with `hidden`), or the head's own prediction
//   e   the target's token embedding of the token at position i + 1 (shared, not copied)
//   z   = W_in·[f; e] + b_in                      (d)
//   h   = z + W_down·silu(W_up·z + b_up) + b_down  (d)   one residual MLP block
//   f'  = g ⊙ h / rms(h)                           (d)   the predicted feature at position i + 1
//   logits = W_out·f'                               the target's LM head (shared, frozen)
// so the argmax of the logits drafts the token at position i + 2, and (f', that token) is the
// next step's input. The head owns only W_in, b_in, W_up, b_up, W_down, b_down and g.
//
// Run-time layout: a DraftHead multiplies by Q8_0 copies of W_in, W_up and W_down in the grouped
// decode layout (kernels/weight_layout.h) when their columns are a multiple of 32, F32 views of
// the trained weights otherwise; the file and DraftHeadWeights stay F32 (the trainer's form).
// Invariants (validate()): every vector has the size its comment gives, all finite; d ≥ 1,
// 1 ≤ H ≤ kMaxDraftHidden. Thread safety: DraftHeadWeights is plain data; a DraftHead is immutable
// and may be shared by threads, each with its own DraftScratch and Ops.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::draft {

inline constexpr int64_t kMaxDraftHidden = 1 << 14;

struct DraftHeadWeights {
  int64_t n_embd = 0;         // d, the target's hidden size
  int64_t hidden = 0;         // H, the MLP's hidden units
  std::vector<float> w_in;    // [d][2d] row-major: row r multiplies [f; e]
  std::vector<float> b_in;    // [d]
  std::vector<float> w_up;    // [H][d]
  std::vector<float> b_up;    // [H]
  std::vector<float> w_down;  // [d][H]
  std::vector<float> b_down;  // [d]
  std::vector<float> norm;    // [d] g, the output gain
  float rms_eps = 1e-5f;      // the target's RMSNorm epsilon

  [[nodiscard]] Status validate() const;
  [[nodiscard]] size_t num_params() const;
};

// A candidate token of one draft step and its probability under the head's softmax.
struct DraftCandidate {
  int32_t token = 0;
  float probability = 0.0f;
};

// Per-thread scratch of the drafting loop.
struct DraftScratch {
  std::vector<float> x, z, up, h, feature, logits, embedding;
};

class DraftHead {
 public:
  // `target` must outlive the head; its n_embd must equal weights.n_embd (checked by the loader).
  DraftHead(DraftHeadWeights weights, const model::Model& target);

  [[nodiscard]] const DraftHeadWeights& weights() const { return w_; }
  [[nodiscard]] const model::Model& target() const { return *target_; }

  // One step: from feature f (n_embd floats) and `token`, writes the predicted next feature into
  // scratch->feature and the logits over the target's vocabulary into scratch->logits.
  void step(std::span<const float> feature, int32_t token, kernels::Ops& ops,
            DraftScratch* scratch) const;

  // Drafts up to `k` tokens greedily after `token`, starting from the target's feature of the
  // position before it; appends them to *out (cleared first).
  void draft(std::span<const float> feature, int32_t token, int32_t k, kernels::Ops& ops,
             DraftScratch* scratch, std::vector<int32_t>* out) const;

  // draft() that also replaces *candidates with the head's top-n candidates at every drafted
  // position and at the one after the last draft: (k + 1) × n ids, position-major, each set
  // padded with its last id when the vocabulary is smaller than n. Set i is what a verification
  // pass's row i (of [token, d1 … dk]) predicts, so SpecEE's exit predictors read it there. The
  // drafts are draft()'s (each is its set's first id); the last set costs one more head step.
  void draft_with_candidates(std::span<const float> feature, int32_t token, int32_t k, int32_t n,
                             kernels::Ops& ops, DraftScratch* scratch, std::vector<int32_t>* out,
                             std::vector<int32_t>* candidates) const;

  // The head's top-n candidates for the token after `token` (highest probability first, ties to
  // the lower id) — what SpecEE's exit predictors read (its speculative LM head: n = 4).
  [[nodiscard]] std::vector<DraftCandidate> top_candidates(std::span<const float> feature,
                                                           int32_t token, int32_t n,
                                                           kernels::Ops& ops,
                                                           DraftScratch* scratch) const;
  // top_candidates' ids without the softmax over the vocabulary (the decode path's form): appends
  // them to *out (cleared first).
  void candidate_ids(std::span<const float> feature, int32_t token, int32_t n, kernels::Ops& ops,
                     DraftScratch* scratch, std::vector<int32_t>* out) const;

 private:
  DraftHeadWeights w_;
  const model::Model* target_;
  std::vector<std::byte> in_q_, up_q_, down_q_;  // the Q8_0 copies (empty where F32 is used)
  kernels::Matrix in_, up_, down_;               // what Ops::matmul multiplies by
};

// The top-n entries of `logits` as (token, softmax probability), highest first, ties to the lower
// id; n is clamped to the vocabulary.
std::vector<DraftCandidate> top_n_softmax(std::span<const float> logits, int32_t n);
// top_n_softmax's ids in its order, in one pass and without exponentials: appended to *out
// (cleared first).
void top_n_ids(std::span<const float> logits, int32_t n, std::vector<int32_t>* out);

}  // namespace keel::draft
