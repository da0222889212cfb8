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
// Expert parallelism (remote_experts.h): with set_expert_parallel(), forward() computes only the
// experts of its local shard and has the others computed by RemoteExperts, overlapped with its own
// work; the outputs are combined as in one process. run_slots() is the shared core: the expert
// outputs of a list of (row, expert) slots — what an expert member computes for its leader.
//
// Thread safety: one MoeFfn per Context (engine thread); the kernels parallelise through Ops.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/status.h"
#include "kernels/kernels.h"
#include "model/expert_shard.h"
#include "model/hparams.h"
#include "model/moe_weights.h"
#include "model/remote_experts.h"

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
  // (≤ max_tokens). xn, out: [n][n_embd]; out is overwritten and may not alias xn. `layer` names
  // the layer to remote experts. A remote failure leaves the remote slots' outputs zero and is
  // kept for take_status() (the caller fails the step); later layers then skip the remote.
  void forward(const MoeWeights& w, int64_t layer, const float* xn, int64_t n, kernels::Ops& ops,
               float* out);
  void forward(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops, float* out) {
    forward(w, 0, xn, n, ops, out);
  }
  // forward() in two halves, so that other work can run while remote experts compute (micro-batch
  // ping-pong): begin() routes, dispatches the remote slots and computes the local ones; finish()
  // collects the remote outputs and writes `out`. Between them xn must stay unchanged and no other
  // call may be made on this MoeFfn; each begin() is followed by its finish() with the same n.
  void begin(const MoeWeights& w, int64_t layer, const float* xn, int64_t n, kernels::Ops& ops);
  void finish(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops, float* out);
  // The same result, one token and one chosen expert at a time (the reference loop).
  void forward_naive(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops,
                     float* out);

  // ys[i] = expert_{slot_expert[i]}(rows[slot_row[i]]) for i < n_slots (≤ max_tokens · k, every
  // expert at most max_tokens times), rows [*][n_embd], ys [n_slots][n_embd]: one pass over each
  // expert's weights (a single row's experts paired into shared calls).
  void run_slots(const MoeWeights& w, const float* rows, int64_t n_slots, const int32_t* slot_row,
                 const int32_t* slot_expert, kernels::Ops& ops, float* ys);

  // Expert parallelism: compute only `local`'s experts here and the rest through ep.remote (null:
  // every expert here, the default).
  void set_expert_parallel(ExpertParallel ep, ExpertShard local) {
    ep_ = ep;
    local_ = local;
  }
  // The first remote failure since the last take (OK when none), and forgets it.
  [[nodiscard]] Status take_status() { return std::exchange(status_, Status()); }

  // The routing of the last call: experts [n][n_expert_used] and their weights.
  [[nodiscard]] std::span<const int32_t> experts(int64_t n) const {
    return {sel_.data(), static_cast<size_t>(n * k_)};
  }
  [[nodiscard]] std::span<const float> weights(int64_t n) const {
    return {wts_.data(), static_cast<size_t>(n * k_)};
  }

 private:
  void route(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops);
  // One row's slots (decode): gate/up of up to 8 experts per call, then the down projections of
  // up to 16 per call — two pool jobs for k ≤ 8.
  void run_one_row(const MoeWeights& w, const float* x, int64_t n_slots, const int32_t* slot_expert,
                   kernels::Ops& ops, float* ys);
  // The slots bucketed per expert (counting sort, stable), each expert's rows gathered and run.
  void run_grouped(const MoeWeights& w, const float* rows, int64_t n_slots, const int32_t* slot_row,
                   const int32_t* slot_expert, kernels::Ops& ops, float* ys);
  // begin()'s expert part with remote experts: the remote slots dispatched, the local ones
  // computed into ys_; collect_remote() (finish) places the remote outputs.
  void start_expert_parallel(const MoeWeights& w, int64_t layer, const float* xn, int64_t n,
                             kernels::Ops& ops);
  void collect_remote();
  // Runs expert e over rows x [m][n_embd] into y [m][n_embd].
  void run_expert(const MoeWeights& w, int64_t e, const float* x, int64_t m, kernels::Ops& ops,
                  float* y);
  // out[t] = Σ_j wts_[t][j] · ys_[t][j] (+ shared expert) in selection order.
  void combine(const MoeWeights& w, const float* xn, int64_t n, kernels::Ops& ops, float* out);

  ExpertParallel ep_;
  ExpertShard local_;
  Status status_;
  MoeParams p_;
  int64_t d_;  // n_embd
  int64_t k_;  // n_expert_used
  int64_t max_tokens_;
  std::vector<float> logits_;                    // [T][n_expert]
  std::vector<int32_t> sel_;                     // [T][k] chosen experts
  std::vector<float> wts_;                       // [T][k] their weights
  std::vector<float> ys_;                        // [T][k][n_embd] expert outputs, per (token, slot)
  std::vector<int32_t> offsets_;                 // [n_expert + 1] bucket starts in order_
  std::vector<int32_t> fill_;                    // [n_expert] next free place per bucket
  std::vector<int32_t> order_;                   // [T·k] slots (t·k + j) grouped by expert
  std::vector<float> xg_;                        // [T][n_embd] one expert's gathered rows
  std::vector<float> yg_;                        // [T][n_embd] its outputs
  std::vector<float> gate_, up_;                 // [T][max(n_ff_exp, n_ff_shexp)]
  std::vector<int32_t> slot_row_, slot_expert_;  // [T·k] per slot: its row and expert
  // Expert parallelism: the local and the remote slots (rows, experts, their slot ids) and the
  // outputs of each part, [T·k][n_embd] at most.
  std::vector<int32_t> loc_row_, loc_expert_, loc_slot_, rem_row_, rem_expert_, rem_slot_;
  // With replicated experts: each slot's shard, the remote slots' shards, and assign_slots' loads.
  std::vector<int32_t> slot_shard_, rem_shard_, pending_;
  std::vector<int64_t> shard_load_;
  std::vector<float> ypart_;
  bool in_flight_ = false;  // remote work dispatched and not yet collected
  int64_t begun_ = -1;      // the n of a begin() not yet finished; -1: none
};

}  // namespace keel::model
