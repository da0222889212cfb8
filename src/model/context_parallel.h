// Context parallelism (CP) as one member's Context sees it: a group of N members, each holding
// a shard of one long sequence's positions in its own KV storage, computes the sequence together.
// Two kinds of step (CpStep::replicated):
//   - ring (prefill, Meta's "pass-KV"): each member computes its own query tokens (zig-zag
//     chunks, cp/cp_plan.h). Per layer it writes their K/V into its shard, then passes its
//     shard's K/V of that layer around the ring (CpRing): in N - 1 hops every member sees every
//     other member's shard and computes its queries' attention against each (causal by global
//     position), the next shard's transfer running while the current one is computed.
//   - replicated (decode, the decode context parallelism of vLLM and SGLang): every member
//     computes the same tokens; one member (the step's owner of each token) stores its K/V, each
//     attends over its own shard only, and the partial rows with their log-sum-exp state
//     (kernels::merge_attention_parts) go around the ring, so every member merges the same parts
//     in the same order and gets the same bits.
// Either way a token's parts are merged in member order, so the result depends on the shards, not
// on the transport or timing; against one process it differs by rounding only (the order of the
// softmax's additions; docs/long-context.md).
//
// Messages are immutable byte vectors shared between the sender and its readers (cp_message.h):
// an in-process ring hands the same bytes on, a socket ring writes them out.
//
// Thread safety: a CpRing end is used by one member's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace keel::model {

using CpMessage = std::shared_ptr<const std::vector<std::byte>>;

// One member's end of a CP group's ring: ranks 0..size()-1, each sending to rank + 1 (mod size)
// and receiving from rank - 1.
class CpRing {
 public:
  virtual ~CpRing() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  // Queues `msg` for the next member and returns without waiting for it to leave.
  virtual Status send_next(CpMessage msg) = 0;
  // The previous member's next message, in the order it sent them; waits for it. Unavailable when
  // the peer is gone or nothing came in time.
  virtual Result<CpMessage> recv_prev() = 0;
  // Waits until every queued message has left this member (for measuring without overlap).
  virtual Status flush() = 0;
};

// One member's share of a step over a single sequence.
struct CpStep {
  // The query tokens this member computes, with their global positions (RoPE, causal mask),
  // strictly ascending. Ring steps: this member's own tokens. Replicated steps: the same tokens on
  // every member.
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  // [n] the local slot each token's K/V is written to, or -1: another member stores it (replicated
  // steps only). Slot s lives in block block_table[s / block_size], row s % block_size.
  std::vector<int32_t> slots;
  // The member's blocks of the sequence, covering the slots of `shard`.
  std::vector<int32_t> block_table;
  // The global position of each local slot once this step's K/V are written: strictly
  // ascending, so a query attends to a prefix of any member's shard.
  std::vector<int32_t> shard;
  bool replicated = false;
  bool want_logits = false;  // the last token's logits
};

// What a member measured in its last forward_cp call (for tests and benchmarks).
struct CpStats {
  int64_t attention_pairs = 0;   // query·key pairs of attention computed (Σ over rows and parts)
  int64_t bytes_sent = 0;        // message bytes this member sent
  double wait_seconds = 0;       // time spent in recv_prev and flush
  double attention_seconds = 0;  // time computing attention parts (the ring hops' compute)
};

// How a Context runs its part of a CP group.
struct ContextParallel {
  CpRing* ring = nullptr;  // borrowed
  // Ring steps: compute a shard while the next one is in flight. Off: each hop's transfers finish
  // before its compute starts (what the overlap hides is the difference).
  bool overlap = true;
  CpStats* stats = nullptr;  // borrowed; null: not measured
};

}  // namespace keel::model
