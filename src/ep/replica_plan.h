// plan_replicas: which hot experts an expert-parallel instance copies onto other shards (EPLB,
// DeepSeek's expert-parallel load balancer), from the router's per-expert token counts
// (model::ExpertTokenCounts, /metrics' keel:moe_expert_tokens_total). A pure policy: counts in,
// model::ExpertPlacement out; no clock, no I/O.
//
// Per layer, each shard starts with its contiguous range of experts and `per_shard` free places
// for replicas. A shard's load is Σ over the experts it holds of count / copies (a replicated
// expert's tokens split evenly over its copies, as assign_slots spreads them). Then, greedily:
// take the most loaded shard; among its experts, by falling count per copy, the first one whose
// new copy — on the least loaded shard that does not hold it and has a free place — lowers the
// layer's highest shard load; add it, and repeat; stop when no copy lowers it. Ties go to the lower
// expert, then the lower shard, so the plan is deterministic.
//
// Thread safety: pure functions over values.
#pragma once

#include <cstdint>
#include <span>

#include "core/result.h"
#include "model/expert_placement.h"

namespace keel::ep {

struct ReplicaPlanInput {
  int64_t n_layer = 0;
  int64_t n_expert = 0;
  std::span<const int64_t> counts;  // [n_layer][n_expert], layer-major; ≥ 0
  int32_t shards = 1;               // the instance's processes, leader included
  int32_t per_shard = 0;            // replica places per shard and layer, ≥ 0
};

// InvalidArgument for a counts grid of the wrong size or a negative count, per_shard < 0, or what
// ExpertPlacement::make refuses.
Result<model::ExpertPlacement> plan_replicas(const ReplicaPlanInput& in);

// The highest shard load of `layer` over the mean shard load, under `placement` and the counts'
// even split (1 for a layer without tokens): the imbalance plan_replicas lowers.
[[nodiscard]] double shard_imbalance(const model::ExpertPlacement& placement,
                                     std::span<const int64_t> counts, int64_t layer);

}  // namespace keel::ep
