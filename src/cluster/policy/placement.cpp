// place_tes; see placement.h.
#include "cluster/policy/placement.h"

#include <algorithm>

namespace keel::cluster {
namespace {

int32_t free_slots(const NodeCapacity& n, int32_t threads_per_te) {
  const int32_t by_cores = n.cores / threads_per_te - n.running_tes;
  return std::max(0, std::min(n.max_tes - n.running_tes, by_cores));
}

bool holds_model(const NodeCapacity& n, const std::string& hint) {
  if (hint.empty()) return false;
  return std::any_of(n.models.begin(), n.models.end(),
                     [&](const std::string& m) { return m.find(hint) != std::string::npos; });
}

}  // namespace

Result<std::vector<std::string>> place_tes(const std::vector<NodeCapacity>& nodes,
                                           const PlacementRequest& request) {
  if (request.tes < 1) return Status::invalid_argument("placement: no TEs asked for");
  if (request.threads_per_te < 1) {
    return Status::invalid_argument("placement: threads per TE must be at least 1");
  }
  std::vector<int32_t> left(nodes.size());
  int64_t total = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    left[i] = free_slots(nodes[i], request.threads_per_te);
    total += left[i];
  }
  if (total < request.tes) {
    std::string room;
    for (size_t i = 0; i < nodes.size(); ++i) {
      room += (room.empty() ? "" : ", ") + nodes[i].host_id + ": " + std::to_string(left[i]);
    }
    return Status::resource_exhausted("placement: " + std::to_string(request.tes) + " TEs of " +
                                      std::to_string(request.threads_per_te) +
                                      " threads asked for, room for " + std::to_string(total) +
                                      (nodes.empty() ? " (no node agents)" : " (" + room + ")"));
  }
  std::vector<std::string> out;
  for (int32_t t = 0; t < request.tes; ++t) {
    size_t best = nodes.size();
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (left[i] == 0) continue;
      if (best == nodes.size()) {
        best = i;
        continue;
      }
      const auto key = [&](size_t k) {
        return std::make_tuple(left[k], holds_model(nodes[k], request.model_hint));
      };
      if (key(i) > key(best) || (key(i) == key(best) && nodes[i].host_id < nodes[best].host_id)) {
        best = i;
      }
    }
    --left[best];
    out.push_back(nodes[best].host_id);
  }
  return out;
}

}  // namespace keel::cluster
