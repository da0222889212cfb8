// Context: the forward pass of a Model over a flat Batch and a paged KvStorage, with per-engine
// scratch buffers sized once for a maximum batch. Data flow per call:
//   validate (layout, batch) → embed → run_layers (attention block, FFN block per layer; K/V of
//   all batch tokens written into their blocks before any token attends, then
//   Ops::paged_attention reads them in place through the block tables) → output norm + head for
//   the tokens that asked for logits. LoRA: a sequence's adapter (BatchSeq::lora) adds its
//   low-rank deltas after each targeted matmul (lora_batch.h). Sparse decode: a sequence's
//   attend_pages restrict its attention, and a Batch::selector (page_selector.h) may replace them
//   at one layer.
// A batch that fails validation changes nothing (neither the KV storage nor the outputs).
// Pipeline stages (LayerRange): a Context built for layers [first, last) runs only those layers
// over a KvStorage of last - first layers (its layer 0 is the model's layer `first`); the first
// stage starts from token embeddings and hands on the residual stream (forward_first_stage), a
// later stage starts from that residual (forward_stage_from): the last one ends with the output
// norm and head, a middle one hands its residual on. The other entry points need the full range.
//
// Thread safety: one Context per engine thread; the Model it borrows must outlive it and may be
// shared with other Contexts. Parallelism comes from kernels::Ops (its thread pool).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/batch.h"
#include "model/context_parallel.h"
#include "model/early_exit.h"
#include "model/expert_token_counts.h"
#include "model/kv_storage.h"
#include "model/lora_batch.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/remote_experts.h"

namespace keel::model {

// The layers [first, last) a pipeline stage owns; last = -1 means n_layer. The default is the
// whole model.
struct LayerRange {
  int64_t first = 0;
  int64_t last = -1;
};

// A run of a batch's tokens [first, first + n); n < 0: to the end of the batch.
struct Rows {
  int64_t first = 0;
  int64_t n = -1;
};

class Context {
 public:
  // Scratch for batches of up to max_batch_tokens tokens (≥ 1). `model` must outlive this.
  // `range` must lie in [0, n_layer] and be non-empty (checked).
  Context(const Model& model, int64_t max_batch_tokens, LayerRange range = {});

  [[nodiscard]] int64_t max_batch_tokens() const { return max_tokens_; }
  [[nodiscard]] int64_t first_layer() const { return first_; }
  [[nodiscard]] int64_t last_layer() const { return last_; }  // exclusive
  [[nodiscard]] bool full_range() const { return first_ == 0 && last_ == hp_.n_layer; }
  // An MoE model's routing is counted into `counts` (borrowed, outlives this; null = not counted;
  // a dense model has nothing to count).
  void count_experts(ExpertTokenCounts* counts) { expert_counts_ = counts; }
  // Expert parallelism (remote_experts.h): this Context computes the experts of the model's
  // ExpertShard and has ep.remote compute the rest. A remote failure fails the forward call
  // (Unavailable or the member's error). Only for MoE models (checked).
  void set_expert_parallel(ExpertParallel ep);

  // Pipeline stage entry points. The KV layout must have last - first layers.
  // forward_first_stage (a range starting at layer 0 and ending before n_layer): embeds the
  // batch, runs the range and replaces *residual with [n_tokens][n_embd] floats, every batch
  // token's residual stream after the range's last layer, in batch order.
  // forward_stage_from (a range starting after layer 0): starts from `residual` ([n_tokens]
  // [n_embd], the previous stage's output for the same batch), runs the range, and then — when
  // the range ends at n_layer — replaces *logits as forward() does, otherwise replaces *residual
  // (may not alias `residual`) with this stage's output. Errors: as forward(), plus
  // InvalidArgument for a range that does not fit the call or a residual of the wrong size.
  Status forward_first_stage(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                             std::vector<float>* residual);
  Status forward_stage_from(const Batch& batch, std::span<const float> residual, KvStorage& kv,
                            kernels::Ops& ops, std::vector<float>* logits,
                            std::vector<float>* residual_out);

  // Runs the batch, writing its K/V into the blocks of `kv` (whose layout must have the model's
  // n_layer and kv_dim) and, when `logits` is not null, replacing *logits with
  // [n_outputs][n_vocab] floats: one row per token with logits[i] = 1, in batch order.
  // Errors: InvalidArgument for a KV layout that does not fit the model and every malformed batch
  // of validate_batch() (batch.h); OutOfRange for a position ≥ the model's n_ctx.
  Status forward(const Batch& batch, KvStorage& kv, kernels::Ops& ops, std::vector<float>* logits);
  // forward() that also replaces *hidden (when not null) with [n_outputs][n_embd] floats: the
  // final hidden state after the output norm of the same rows — the features a draft head
  // (draft/draft_head.h) continues from. The logits are bit for bit those of forward() (the norm
  // is written out once and multiplied, which Ops guarantees equal to the fused path); the extra
  // cost is one n_outputs × n_embd copy, and a null `hidden` is exactly forward().
  Status forward(const Batch& batch, KvStorage& kv, kernels::Ops& ops, std::vector<float>* logits,
                 std::vector<float>* hidden);

  // forward() without the output head: replaces *hidden with [n_outputs][n_embd] floats, the
  // final hidden state after the output norm of each token with logits[i] = 1, in batch order —
  // the rows the head would multiply (features for a side model, e.g. a length predictor).
  // Same K/V writes and errors as forward().
  Status forward_hidden(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                        std::vector<float>* hidden);

  // forward() with per-token early exit (early_exit.h): the layer loop stops once every token has
  // exited or run the last layer; the skipped layers' K/V are filled from each exited token's
  // residual (projections only). With no token exiting, the outputs and K/V equal forward()'s.
  // Same errors as forward(), plus InvalidArgument for a may_exit of the wrong length.
  Status forward_early_exit(const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                            EarlyExit* early_exit, std::vector<float>* logits,
                            std::vector<float>* hidden);

  // Context parallelism (context_parallel.h): this Context's member's part of one step of a CP
  // group over a single sequence whose shard lives in `kv` (the model's layers, as forward()).
  // Every member of the group calls it for the same step at the same time; a member that fails
  // (or whose ring fails) leaves the others waiting until their ring reports it. `logits`, when
  // not null, is replaced with the last token's row when step.want_logits, else cleared. Errors:
  // InvalidArgument for a step that does not fit (sizes, positions not ascending, a slot that is
  // not its position's, blocks out of range, a LoRA or expert-parallel context), OutOfRange for a
  // position ≥ n_ctx, the ring's errors and Corrupt for a message that does not match.
  Status forward_cp(const CpStep& step, KvStorage& kv, kernels::Ops& ops, const ContextParallel& cp,
                    std::vector<float>* logits);

  // CacheBlend's token selection probe: runs layers [0, check_layer) over the batch exactly as
  // forward() does (their K/V rows are written), then computes layer check_layer's V rows of the
  // batch tokens and replaces *deviation with, per token, the squared L2 distance to the V row
  // stored at its position (e.g. linked from a chunk cache). Layer check_layer is not written.
  // check_layer in [0, n_layer) (0 compares position-free V: all zeros for exact copies).
  Status value_deviation(const Batch& batch, KvStorage& kv, kernels::Ops& ops, int64_t check_layer,
                         std::vector<float>* deviation);

 private:
  Status validate(const Batch& batch, const KvStorage& kv) const;
  // validate() plus InvalidArgument unless this Context has the whole model's layers.
  Status validate_full(const Batch& batch, const KvStorage& kv) const;
  // Layer il's index in the KV storage (il - first_).
  [[nodiscard]] int64_t kv_layer(int64_t il) const { return il - first_; }
  void embed(const Batch& batch);
  // Every layer of the range in order; the single place a per-layer hook (early exit) will go.
  // Errors: a remote expert failure (take_moe_status()).
  Status run_layers(const Batch& batch, KvStorage& kv, kernels::Ops& ops);
  // The MoE layer's remote failure since the last call (OK without one, or for a dense model).
  Status take_moe_status();
  // The attention block of layer il for `rows` (the whole batch by default; a part only without
  // LoRA or page selection): its K/V written, then its queries attend.
  void attention_block(int64_t il, const Batch& batch, KvStorage& kv, kernels::Ops& ops,
                       Rows rows = {});
  // The halves of an attention block around the KV write and the attention: rows [t0, t0 + n)
  // of x_ normed and projected into q_/k_/v_ (LoRA, biases, per-head norms, RoPE at `positions`,
  // [n]); and attn_'s rows through the output projection, added to x_.
  void project_qkv(int64_t il, const int32_t* positions, int64_t t0, int64_t n, kernels::Ops& ops);
  void output_projection(int64_t il, int64_t t0, int64_t n, kernels::Ops& ops);
  // Context parallelism (context_cp.cpp).
  Status validate_cp(const CpStep& step, const KvStorage& kv, const ContextParallel& cp) const;
  Status cp_attend(int64_t il, const CpStep& step, const KvStorage& kv, kernels::Ops& ops,
                   const ContextParallel& cp);
  // Part `part` of the step's queries: their attention over the positions `shard` (ascending) of
  // `kv` through `table`, unnormalised, with its state; rows with no position there get l = 0.
  void cp_attend_part(const CpStep& step, const kernels::PagedKv& kv, const int32_t* table,
                      std::span<const int32_t> shard, int part, kernels::Ops& ops, CpStats* stats);
  // Ring steps: the shards of every member, passed around the ring, into parts [0, N).
  Status cp_ring_parts(int64_t il, const CpStep& step, const KvStorage& kv, kernels::Ops& ops,
                       const ContextParallel& cp);
  // Replicated steps: this member's part, and the others' gathered from the ring.
  Status cp_gather_parts(int64_t il, const CpStep& step, const KvStorage& kv, kernels::Ops& ops,
                         const ContextParallel& cp);
  void ffn_block(int64_t il, int64_t n_tokens, kernels::Ops& ops);
  // Micro-batch ping-pong (context_micro_batches.cpp; DeepSeek's and MegaScale-Infer's overlap):
  // with remote experts, the batch is cut into two halves A and B, and while one half's remote
  // experts compute, the leader runs the other half's attention —
  //   attn(A, l) · experts(A, l) begin · attn(B, l) · experts(A, l) finish · experts(B, l) begin ·
  //   attn(A, l+1) · experts(B, l) finish · …
  // A token of B attends to A's K/V of the same layer, written before; a token of A never needs
  // B's (B's tokens of a sequence come later in the batch, at later positions). Every row is
  // computed as in one pass, so the output is the same.
  [[nodiscard]] bool ping_pong_applies(const Batch& batch) const;
  Status run_layers_ping_pong(const Batch& batch, KvStorage& kv, kernels::Ops& ops);
  // The MoE FFN of `rows` in two halves (MoeFfn::begin/finish), its output in moe_out_.
  void moe_begin(int64_t il, Rows rows, kernels::Ops& ops);
  void moe_finish(int64_t il, Rows rows, kernels::Ops& ops);
  // The KV access: store this layer's K/V rows (converted to the storage's type) in their
  // blocks, then attend over [0, pos] of each token's sequence.
  void write_kv(int64_t il, const Batch& batch, KvStorage& kv, Rows rows = {}) const;
  // Early exit's fill: layer il's K/V rows of every batch token from x_ (norm, K/V projections,
  // RoPE) written into their blocks; no attention, no FFN.
  void fill_kv(int64_t il, const Batch& batch, KvStorage& kv, kernels::Ops& ops);
  void attend(int64_t il, const Batch& batch, const KvStorage& kv, kernels::Ops& ops,
              Rows rows = {});
  // At Batch::select_layer: asks the selector for each marked sequence's pages and rebinds them.
  void select_pages(int64_t il, const Batch& batch, const KvStorage& kv);
  // The rows with logits[i] = 1: their logits and, when `hidden` is not null, their normed
  // hidden states.
  void output_logits(const Batch& batch, kernels::Ops& ops, std::vector<float>* logits,
                     std::vector<float>* hidden);
  // Gathers the rows of the tokens with logits[i] = 1 into xn_; returns how many.
  int64_t gather_outputs(const Batch& batch);

  const Model& model_;
  const HParams& hp_;
  int64_t max_tokens_;
  int64_t first_ = 0;  // the layer range [first_, last_)
  int64_t last_ = 0;
  // Scratch, each sized for max_tokens_ rows.
  std::vector<float> x_;     // [T][n_embd] residual stream
  std::vector<float> xn_;    // [T][n_embd] the rows whose logits are wanted, gathered
  std::vector<float> q_;     // [T][q_dim]
  std::vector<float> k_;     // [T][kv_dim]
  std::vector<float> v_;     // [T][kv_dim]
  std::vector<float> attn_;  // [T][q_dim] attention output
  std::vector<float> proj_;  // [T][n_embd] block output before the residual add
  std::vector<float> gate_;  // [T][n_ff] (dense models)
  std::vector<float> up_;    // [T][n_ff] (dense models)
  // Mixture-of-experts models: the FFN's normalised input rows and the MoE scratch.
  std::vector<float> moe_in_;    // [T][n_embd]
  std::vector<float> moe_out_;   // [T][n_embd] the FFN's output rows during ping-pong
  std::unique_ptr<MoeFfn> moe_;  // null for a dense model
  ExpertParallel ep_;            // how MoE layers reach remote experts (set_expert_parallel)
  ExpertTokenCounts* expert_counts_ = nullptr;
  // Per token of the current batch: positions attended (pos + 1) and its sequence's block table.
  std::vector<int32_t> n_kv_;                 // [T]
  std::vector<const int32_t*> block_tables_;  // [T] where the token's K/V row is written
  // [T] the table attention reads: block_tables_, or for a sparse-decode sequence its attended
  // pages' blocks compacted into compact_[seq] (keys carry their position in RoPE, and softmax
  // does not depend on the order of the keys, so compaction changes nothing else).
  std::vector<const int32_t*> attend_tables_;
  std::vector<std::vector<int32_t>> compact_;
  LoraBatch lora_;  // the batch's adapters (BatchSeq::lora), bound with the tables
  // Context parallelism's parts, per member of the group: [N][T][q_dim] rows and [N][T][n_head]
  // states; the query tables and per-part counts of one call.
  std::vector<float> cp_acc_, cp_m_, cp_l_;
  std::vector<int32_t> cp_n_kv_;
  std::vector<const int32_t*> cp_tables_;
  std::vector<int32_t> cp_identity_;                // 0, 1, 2, …: a received shard's block table
  std::vector<float> select_q_;                     // the selector's query rows of one sequence
  std::vector<std::vector<size_t>> select_tokens_;  // [seq] its batch tokens, when marked
  // Fills n_kv_, block_tables_ and attend_tables_ for the batch (bs: positions per block).
  void bind_tables(const Batch& batch, int32_t bs);
  // compact_[s] = the blocks of sequence s's `pages` (empty = every page up to each token).
  void compact(const Batch& batch, size_t s, std::span<const int32_t> pages);
  // n_kv_[t] and attend_tables_[t] of token t from its sequence's compact_ entry.
  void bind_token(const Batch& batch, size_t t, int32_t bs);
};

}  // namespace keel::model
