// ExpertPlacement: validation, each shard's part, and the per-step slot assignment.
#include "model/expert_placement.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/check.h"

namespace keel::model {

Result<ExpertPlacement> ExpertPlacement::make(int32_t shards, int64_t n_layer, int64_t n_expert,
                                              std::vector<ExpertReplica> replicas) {
  KEEL_TRY((ExpertShard{0, shards, false}).validate().with_prefix("expert placement"));
  if (n_layer < 1 || n_expert < 1) {
    return Status::invalid_argument("expert placement: the model has no experts");
  }
  ExpertPlacement p;
  p.shards_ = shards;
  p.n_layer_ = n_layer;
  p.n_expert_ = n_expert;
  p.mask_.resize(static_cast<size_t>(n_layer * n_expert));
  for (int64_t l = 0; l < n_layer; ++l) {
    for (int64_t e = 0; e < n_expert; ++e) {
      p.mask_[static_cast<size_t>(l * n_expert + e)] = uint64_t{1}
                                                       << ExpertShard::owner(e, n_expert, shards);
    }
  }
  std::sort(replicas.begin(), replicas.end());
  for (const ExpertReplica& r : replicas) {
    const std::string what = "expert placement: replica of layer " + std::to_string(r.layer) +
                             " expert " + std::to_string(r.expert) + " on shard " +
                             std::to_string(r.shard);
    if (r.layer < 0 || r.layer >= n_layer || r.expert < 0 || r.expert >= n_expert) {
      return Status::invalid_argument(what + ": not in the model (" + std::to_string(n_layer) +
                                      " layers of " + std::to_string(n_expert) + " experts)");
    }
    if (r.shard < 0 || r.shard >= shards) {
      return Status::invalid_argument(what + ": no such shard");
    }
    uint64_t& m = p.mask_[static_cast<size_t>(r.layer * n_expert + r.expert)];
    if ((m >> r.shard) & 1) {
      return Status::invalid_argument(what + ": that shard already holds it");
    }
    m |= uint64_t{1} << r.shard;
  }
  p.replicas_ = std::move(replicas);
  return p;
}

ExpertShard ExpertPlacement::shard(int32_t index) const {
  ExpertShard s{index, shards_, index > 0, {}};
  for (const ExpertReplica& r : replicas_) {
    if (r.shard == index) s.replicas.emplace_back(r.layer, r.expert);
  }
  return s;  // sorted: replicas_ is sorted by (layer, expert, shard)
}

void assign_slots(const ExpertPlacement& placement, int64_t layer,
                  std::span<const int32_t> slot_expert, std::span<int32_t> slot_shard,
                  std::span<int64_t> load, std::vector<int32_t>& pending) {
  KEEL_CHECK(slot_shard.size() >= slot_expert.size() &&
             load.size() >= static_cast<size_t>(placement.shards()));
  std::fill(load.begin(), load.end(), 0);
  pending.clear();  // the slots of replicated experts
  for (size_t i = 0; i < slot_expert.size(); ++i) {
    const uint64_t h = placement.holders(layer, slot_expert[i]);
    if (std::has_single_bit(h)) {
      slot_shard[i] = std::countr_zero(h);
      ++load[static_cast<size_t>(slot_shard[i])];
    } else {
      pending.push_back(static_cast<int32_t>(i));
    }
  }
  // The replicated experts' slots, expert by expert in index order (within one expert in slot
  // order), each to its least-loaded holder so far.
  std::stable_sort(pending.begin(), pending.end(),
                   [&](int32_t a, int32_t b) { return slot_expert[a] < slot_expert[b]; });
  for (const int32_t i : pending) {
    const uint64_t h = placement.holders(layer, slot_expert[i]);
    int32_t best = -1;
    for (uint64_t rest = h; rest != 0; rest &= rest - 1) {
      const int32_t s = std::countr_zero(rest);
      if (best < 0 || load[static_cast<size_t>(s)] < load[static_cast<size_t>(best)]) best = s;
    }
    slot_shard[i] = best;
    ++load[static_cast<size_t>(best)];
  }
}

}  // namespace keel::model
