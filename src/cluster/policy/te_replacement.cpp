// The replacement rule (see te_replacement.h).
#include "cluster/policy/te_replacement.h"

#include <algorithm>

namespace keel::cluster {

std::vector<ReplaceAction> decide_replacements(const FleetSnapshot& fleet,
                                               const std::vector<ManagedTe>& managed,
                                               int warm_idle) {
  std::vector<ReplaceAction> out;
  for (size_t i = 0; i < managed.size(); ++i) {
    const ManagedTe& te = managed[i];
    if (te.replaced) continue;
    const auto it = std::find_if(fleet.tes.begin(), fleet.tes.end(),
                                 [&](const TeInfo& t) { return t.address == te.address; });
    if (it == fleet.tes.end() || health::serving(it->state)) continue;
    ReplaceAction a{i, it->state, ReplaceHow::kColdStart};
    if (warm_idle > 0) {  // a warm TE binds to any role
      a.how = ReplaceHow::kWarmPool;
      --warm_idle;
    }
    out.push_back(a);
  }
  return out;
}

TeSpec replacement_spec(TeSpec spec, const std::string& name) {
  spec.id = name;
  return spec;
}

}  // namespace keel::cluster
