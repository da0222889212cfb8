// plan_replicas: the greedy per-layer replication of hot experts (see replica_plan.h).
#include "ep/replica_plan.h"

#include <algorithm>
#include <bit>
#include <numeric>
#include <string>
#include <vector>

namespace keel::ep {
namespace {

// One layer's state while it is planned.
struct LayerPlan {
  std::span<const int64_t> counts;  // [n_expert]
  std::vector<uint64_t> holders;    // [n_expert] bit s: shard s holds it
  std::vector<int32_t> free;        // [shards] replica places left

  [[nodiscard]] double per_copy(int64_t e) const {
    return static_cast<double>(counts[static_cast<size_t>(e)]) /
           std::popcount(holders[static_cast<size_t>(e)]);
  }
  [[nodiscard]] std::vector<double> loads(int32_t shards) const {
    std::vector<double> load(static_cast<size_t>(shards), 0.0);
    for (size_t e = 0; e < holders.size(); ++e) {
      const double c = per_copy(static_cast<int64_t>(e));
      for (uint64_t rest = holders[e]; rest != 0; rest &= rest - 1) {
        load[static_cast<size_t>(std::countr_zero(rest))] += c;
      }
    }
    return load;
  }
};

double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// The best new copy of one of shard `from`'s experts, or false when none lowers the highest load.
bool add_one_copy(LayerPlan& lp, int32_t layer, int32_t shards,
                  std::vector<model::ExpertReplica>& out) {
  const std::vector<double> load = lp.loads(shards);
  const double top = max_of(load);
  const auto from = static_cast<int32_t>(std::max_element(load.begin(), load.end()) - load.begin());
  std::vector<int32_t> mine;
  for (size_t e = 0; e < lp.holders.size(); ++e) {
    if ((lp.holders[e] >> from) & 1) mine.push_back(static_cast<int32_t>(e));
  }
  std::stable_sort(mine.begin(), mine.end(),
                   [&](int32_t a, int32_t b) { return lp.per_copy(a) > lp.per_copy(b); });
  for (const int32_t e : mine) {
    if (lp.counts[static_cast<size_t>(e)] == 0) break;
    int32_t to = -1;
    for (int32_t s = 0; s < shards; ++s) {
      if ((lp.holders[static_cast<size_t>(e)] >> s) & 1 || lp.free[static_cast<size_t>(s)] == 0) {
        continue;
      }
      if (to < 0 || load[static_cast<size_t>(s)] < load[static_cast<size_t>(to)]) to = s;
    }
    if (to < 0) continue;
    lp.holders[static_cast<size_t>(e)] |= uint64_t{1} << to;
    if (max_of(lp.loads(shards)) < top - 1e-9) {
      --lp.free[static_cast<size_t>(to)];
      out.push_back({layer, e, to});
      return true;
    }
    lp.holders[static_cast<size_t>(e)] &= ~(uint64_t{1} << to);
  }
  return false;
}

}  // namespace

Result<model::ExpertPlacement> plan_replicas(const ReplicaPlanInput& in) {
  if (in.n_layer < 1 || in.n_expert < 1 ||
      in.counts.size() != static_cast<size_t>(in.n_layer * in.n_expert)) {
    return Status::invalid_argument(
        "replica plan: expected counts for " + std::to_string(in.n_layer) + " layers of " +
        std::to_string(in.n_expert) + " experts, got " + std::to_string(in.counts.size()));
  }
  if (in.per_shard < 0) return Status::invalid_argument("replica plan: per_shard must be ≥ 0");
  if (std::any_of(in.counts.begin(), in.counts.end(), [](int64_t c) { return c < 0; })) {
    return Status::invalid_argument("replica plan: a negative token count");
  }
  KEEL_ASSIGN_OR_RETURN(model::ExpertPlacement none,
                        model::ExpertPlacement::make(in.shards, in.n_layer, in.n_expert, {}));
  std::vector<model::ExpertReplica> replicas;
  for (int64_t l = 0; l < in.n_layer; ++l) {
    LayerPlan lp;
    lp.counts =
        in.counts.subspan(static_cast<size_t>(l * in.n_expert), static_cast<size_t>(in.n_expert));
    lp.holders.resize(static_cast<size_t>(in.n_expert));
    for (int64_t e = 0; e < in.n_expert; ++e)
      lp.holders[static_cast<size_t>(e)] = none.holders(l, e);
    lp.free.assign(static_cast<size_t>(in.shards), in.per_shard);
    const int64_t budget = int64_t{in.per_shard} * in.shards;
    for (int64_t i = 0; i < budget; ++i) {
      if (!add_one_copy(lp, static_cast<int32_t>(l), in.shards, replicas)) break;
    }
  }
  return model::ExpertPlacement::make(in.shards, in.n_layer, in.n_expert, std::move(replicas));
}

double shard_imbalance(const model::ExpertPlacement& placement, std::span<const int64_t> counts,
                       int64_t layer) {
  LayerPlan lp;
  lp.counts = counts.subspan(static_cast<size_t>(layer * placement.n_expert()),
                             static_cast<size_t>(placement.n_expert()));
  for (int64_t e = 0; e < placement.n_expert(); ++e) {
    lp.holders.push_back(placement.holders(layer, e));
  }
  const std::vector<double> load = lp.loads(placement.shards());
  const double mean = std::accumulate(load.begin(), load.end(), 0.0) / placement.shards();
  return mean > 0 ? max_of(load) / mean : 1.0;
}

}  // namespace keel::ep
