// plan_takeover; see takeover_plan.h.
#include "cluster/policy/takeover_plan.h"

#include <set>

namespace keel::cluster {

TakeoverPlan plan_takeover(const std::vector<std::string>& wanted_roles,
                           const std::vector<LiveTe>& live, const std::string& id_prefix) {
  TakeoverPlan plan;
  std::vector<bool> used(live.size(), false);
  std::set<std::string> taken_ids;
  for (const LiveTe& te : live) taken_ids.insert(te.id);
  int next = 0;
  for (size_t w = 0; w < wanted_roles.size(); ++w) {
    bool matched = false;
    for (size_t l = 0; l < live.size() && !matched; ++l) {
      if (used[l] || live[l].role != wanted_roles[w]) continue;
      used[l] = true;
      matched = true;
      plan.adopted.push_back(live[l].id);
    }
    if (matched) continue;
    std::string id;
    do {
      id = id_prefix + std::to_string(next++);
    } while (taken_ids.count(id) > 0);
    taken_ids.insert(id);
    plan.start.push_back({w, id});
  }
  return plan;
}

}  // namespace keel::cluster
