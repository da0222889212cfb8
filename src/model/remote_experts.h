// RemoteExperts: the experts of an MoE layer that live in other processes of an expert-parallel
// instance (ExpertShard in expert_shard.h), as MoeFfn sees them. Per layer and step MoeFfn routes
// the batch, hands the slots (token row, chosen expert) whose expert is not local to dispatch(),
// computes its own experts meanwhile, and then collect()s the remote slots' outputs — so the
// exchange hides behind the local experts' compute (ExpertParallel::overlap off: dispatch and
// collect first, then the local experts, for measuring what the overlap hides).
//
// The outputs are each expert's own SwiGLU result per slot, not a partial sum: MoeFfn sums them
// in selection order exactly as a single process does, so an EP instance computes bit for bit
// what one process computes. With replicated experts (ExpertParallel::placement) the leader
// chooses which copy computes each slot, and says so in ExpertWork::slot_shard.
//
// Thread safety: one caller (the Context's thread); dispatch and collect alternate.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/status.h"

namespace keel::model {

class ExpertPlacement;

// One layer's remote work: every slot's expert lives elsewhere.
struct ExpertWork {
  int64_t layer = 0;
  int64_t n_rows = 0;                    // rows [n_rows][n_embd]: the batch's normalised FFN inputs
  const float* rows = nullptr;           // (borrowed until dispatch() returns)
  int64_t n_slots = 0;                   // slots, each one (row, expert) pair
  const int32_t* slot_row = nullptr;     // [n_slots] row of each slot, < n_rows
  const int32_t* slot_expert = nullptr;  // [n_slots] its expert
  // [n_slots] the shard that computes each slot (assign_slots, with replicated experts); null:
  // each expert's owner (ExpertShard::owner).
  const int32_t* slot_shard = nullptr;
};

class RemoteExperts {
 public:
  virtual ~RemoteExperts() = default;
  // Starts the work on the processes that own its experts and returns without waiting for them.
  // Errors (Unavailable): a member is gone or was lost before; nothing is then in flight.
  virtual Status dispatch(const ExpertWork& work) = 0;
  // Waits for the dispatched work: ys [n_slots][n_embd], slot i's expert output at row i.
  // Errors: Unavailable (a member died or did not answer in time), or the member's own error.
  virtual Status collect(float* ys) = 0;
};

// How a Context runs an expert-parallel MoE layer.
struct ExpertParallel {
  RemoteExperts* remote = nullptr;  // borrowed; null = every expert local
  bool overlap = true;              // compute the local experts while the remote ones run
  // Replicated hot experts (model/expert_placement.h; borrowed): each layer's slots are spread
  // over the copies by assign_slots. Null: every expert has one copy, on its owner.
  const ExpertPlacement* placement = nullptr;
  // Counts the slots computed here (borrowed; null: not counted), beside the members' counts.
  std::atomic<int64_t>* local_slots = nullptr;
  // With overlap, a batch of two or more tokens runs as two micro-batches, one's attention while
  // the other's remote experts compute (Context's ping-pong). Off by default: measured no faster
  // (docs/moe.md).
  bool ping_pong = false;
  std::atomic<int64_t>* ping_pong_passes = nullptr;  // counts them (borrowed; null: not counted)
};

}  // namespace keel::model
