// StepPlan: what the scheduler decided for one engine step, as plain data — the sequences to
// compute (decodes first, then prefill chunks, FCFS), the requests it preempted and the KV block
// work to perform before the forward pass: demotions to the lower tiers, copy-on-write copies,
// promotions from the tiers and PIC row links, in that order. SeqResult carries a sampled token
// back into Scheduler::update().
//
// Invariants (of a plan returned by Scheduler::schedule()): num_tokens() ≤ max_batched_tokens;
// each request at most once — except that a PIC link's last recompute seq may be followed
// directly by the request's first tail chunk, computed in the same forward pass — so at most
// max_num_seqs requests; every seq's block_table covers positions [0, start_pos + num_tokens).
// Thread safety: plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/types.h"
#include "kv/block_hash.h"
#include "kv/kv_cache_manager.h"

namespace keel::engine {

// Stands in a plan for a token sampled by an earlier step whose result is not known yet
// (schedule-ahead). Scheduler::resolve_plan() replaces it once that step's update() ran.
inline constexpr int32_t kPlaceholderToken = -1;

// One sequence's work in a step.
struct ScheduledSeq {
  RequestKey key = 0;
  int32_t start_pos = 0;   // first position computed this step (tokens before it are computed or
                           // computing in an earlier step)
  int32_t num_tokens = 0;  // positions [start_pos, start_pos + num_tokens): decode 1, prefill ≥ 1
  bool samples = false;    // the chunk reaches the end of the sequence's tokens: sample one token
                           // from the logits of its last position
  std::vector<int32_t> tokens;  // [num_tokens] token ids at those positions; kPlaceholderToken
                                // where an earlier step's sample is not known yet
  std::vector<kv::BlockId> block_table;  // snapshot: KV blocks of positions [0, ...)
  // Explicit positions (ascending) when the seq recomputes scattered positions of a PIC link;
  // empty = [start_pos, start_pos + num_tokens). Such a seq never samples.
  std::vector<int32_t> positions;
  // Speculative verification: the last num_drafts tokens are drafts (docs/speculative.md); every
  // one of the last num_drafts + 1 positions yields logits, and the step emits 1..num_drafts + 1
  // tokens. samples is true; num_tokens = num_drafts + 1 (the last known token first).
  int32_t num_drafts = 0;
  [[nodiscard]] bool is_decode() const {  // one known token (and its drafts) at the end
    return positions.empty() && num_tokens == num_drafts + 1;
  }
  [[nodiscard]] int32_t position(int32_t i) const {
    return positions.empty() ? start_pos + i : positions[static_cast<size_t>(i)];
  }
};

// A PIC link's row copy: a chunk-local K/V row of every layer into a request's block at the
// chunk's real position, K rotated by delta (model::move_kv_rows).
struct RowLink {
  kv::BlockId src_block = 0;
  int32_t src_row = 0;
  kv::BlockId dst_block = 0;
  int32_t dst_row = 0;
  int32_t delta = 0;
};

// A block filled from a lower KV tier (T1/T2) at admission: its payload is copied into the pool
// block before the forward pass, after which the block counts as computed.
struct Promotion {
  kv::BlockId block = 0;
  std::vector<std::byte> payload;  // the block's bytes as the tier stored them
};

// CacheBlend's probe of one linked request (model::Context::value_deviation): its positions
// [start, start + tokens.size()) run through the first layer in context, then the layer-1 V
// deviations from the linked rows choose which linked positions it recomputes
// (Scheduler::apply_probe). Not a seq: it samples nothing and is not part of update().
struct ProbePlan {
  RequestKey key = 0;
  int32_t start = 0;
  std::vector<int32_t> tokens;
  std::vector<kv::BlockId> block_table;
};

struct StepPlan {
  int64_t step_id = 0;                // consecutive from 0; update() takes plans in this order
  std::vector<ScheduledSeq> seqs;     // running decodes first, then prefill chunks, FCFS
  std::vector<RequestKey> preempted;  // preempted (by recompute) in this schedule() call
  std::vector<kv::BlockCopy> copies;  // {src, dst} block copies to do before the forward pass
  // Cached blocks this schedule() evicted from the pool (with tiers only): copied down to the
  // tiers first, before copies and promotions may overwrite them.
  std::vector<kv::EvictedCachedBlock> demotions;
  std::vector<Promotion> promotions;  // blocks to fill from the tiers, after the copies
  std::vector<RowLink> links;         // PIC row copies, after the promotions
  // Compiled-chunk requests whose retained blocks the links read: released once they are done.
  std::vector<RequestKey> link_sources;
  std::optional<ProbePlan> probe;             // at most one CacheBlend probe per step
  [[nodiscard]] int32_t num_tokens() const {  // tokens computed this step
    int32_t n = 0;
    for (const ScheduledSeq& s : seqs) n += s.num_tokens;
    return n;
  }
  [[nodiscard]] bool empty() const { return seqs.empty(); }  // nothing to compute
};

// A token sampled for a seq with samples = true: one per seq, or for a seq with drafts the tokens
// it emitted (accepted drafts then one more), consecutive and in order.
struct SeqResult {
  RequestKey key = 0;
  int32_t token = 0;
};

}  // namespace keel::engine
