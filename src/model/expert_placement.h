// ExpertPlacement: where an expert-parallel instance's experts live once hot experts are
// replicated (EPLB-style): every expert on its owner shard (ExpertShard::owner, the contiguous
// ranges), plus replicas — extra copies of chosen (layer, expert) pairs on other shards. And the
// per-step rule that spreads a layer's slots over the copies: assign_slots().
//
// assign_slots is a pure function of the slots and the placement, so a leader decides alone where
// each slot runs and the result does not depend on timing: the slots of an expert with one copy go
// to its owner; then the slots of each replicated expert, in expert order, each to whichever of
// its holders has been given the fewest slots so far in this call (ties: the lower shard). Every
// copy computes the same output for a slot (the same weights, the same kernels row by row), so
// where a slot runs changes the step's time, never its result.
//
// The plan that chooses the replicas (from the router's per-expert token counts) is a policy of
// the expert-parallel module (ep/replica_plan.h); this header is what the model and the members
// need to hold and use one.
//
// Thread safety: plain data; const methods are safe from any thread.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "core/result.h"
#include "model/expert_shard.h"

namespace keel::model {

struct ExpertReplica {
  int32_t layer = 0;
  int32_t expert = 0;
  int32_t shard = 0;  // the shard holding this extra copy (never the expert's owner)
  friend bool operator==(const ExpertReplica&, const ExpertReplica&) = default;
  friend auto operator<=>(const ExpertReplica&, const ExpertReplica&) = default;
};

class ExpertPlacement {
 public:
  ExpertPlacement() = default;  // one shard, no replicas
  // InvalidArgument for shards outside [1, 64], n_layer or n_expert < 1, a replica outside the
  // model, on a shard out of range, on the expert's owner, or named twice. Replicas are sorted.
  static Result<ExpertPlacement> make(int32_t shards, int64_t n_layer, int64_t n_expert,
                                      std::vector<ExpertReplica> replicas);

  [[nodiscard]] int32_t shards() const { return shards_; }
  [[nodiscard]] int64_t n_layer() const { return n_layer_; }
  [[nodiscard]] int64_t n_expert() const { return n_expert_; }
  [[nodiscard]] const std::vector<ExpertReplica>& replicas() const { return replicas_; }
  // Bit s set: shard s holds (layer, expert) — its owner's bit and its replicas'.
  [[nodiscard]] uint64_t holders(int64_t layer, int64_t expert) const {
    return mask_[static_cast<size_t>(layer * n_expert_ + expert)];
  }
  // Shard `index`'s part: its range plus its replicas (experts_only for a member, index > 0).
  [[nodiscard]] ExpertShard shard(int32_t index) const;

 private:
  int32_t shards_ = 1;
  int64_t n_layer_ = 0;
  int64_t n_expert_ = 0;
  std::vector<ExpertReplica> replicas_;
  std::vector<uint64_t> mask_;  // [n_layer][n_expert]
};

// slot_shard[i] = the shard that computes slot i (expert slot_expert[i] of `layer`), by the rule
// in the header comment. `load` is scratch of placement.shards() entries; on return it holds each
// shard's slot count. `pending` is the caller's scratch (reused across calls: no allocation once
// it has grown). Experts must be in [0, n_expert) and layer in [0, n_layer).
void assign_slots(const ExpertPlacement& placement, int64_t layer,
                  std::span<const int32_t> slot_expert, std::span<int32_t> slot_shard,
                  std::span<int64_t> load, std::vector<int32_t>& pending);

}  // namespace keel::model
