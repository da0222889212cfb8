// SequencePlan: one sequence's shards in a context-parallel group of N members, and the steps that
// extend it (model::CpStep, one per member) — a pure function of the tokens appended so far, so
// every member computes the same plan: an in-process group builds all the steps, a member process
// builds them too and runs its own.
//   - append(≥ 2N tokens): a ring step; member i computes and stores zig-zag chunks i and
//     2N − 1 − i of the new positions (cp_plan.h) and passes its shard around the ring;
//   - append(< 2N tokens, e.g. one decode token): a replicated step; every member computes every
//     token, each token's K/V stored by decode_owner (the member holding the fewest positions).
// The last token's logits come from member 0 (it holds chunk 2N − 1, and computes every token of a
// replicated step).
//
// Thread safety: none (one owner).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/context_parallel.h"

namespace keel::cp {

class SequencePlan {
 public:
  SequencePlan(int n_members, int32_t block_size);

  // The N steps that append `tokens` (≥ 1) after the current length. Block tables number each
  // member's blocks 0, 1, … in slot order.
  [[nodiscard]] std::vector<model::CpStep> append(std::span<const int32_t> tokens) const;
  // Records `steps` (as append returned them) as run: their shards become the members'.
  void commit(const std::vector<model::CpStep>& steps);

  [[nodiscard]] int n_members() const { return static_cast<int>(shards_.size()); }
  [[nodiscard]] int32_t length() const { return length_; }
  [[nodiscard]] const std::vector<int32_t>& shard(int member) const {
    return shards_[static_cast<size_t>(member)];
  }

 private:
  // Member r's step storing `stored` (ascending positions) in its next slots.
  [[nodiscard]] model::CpStep step_for(int r, std::span<const int32_t> stored) const;
  std::vector<model::CpStep> ring_steps(std::span<const int32_t> tokens) const;
  std::vector<model::CpStep> replicated_steps(std::span<const int32_t> tokens) const;

  int32_t block_size_;
  std::vector<std::vector<int32_t>> shards_;  // [member] the global position of each slot
  int32_t length_ = 0;
};

}  // namespace keel::cp
