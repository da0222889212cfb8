// Names of TE roles and lookup in a fleet snapshot (fleet.h).
#include "cluster/fleet.h"

namespace keel::cluster {

std::string_view te_role_name(TeRole role) {
  switch (role) {
    case TeRole::kColocated:
      return "colocated";
    case TeRole::kPrefill:
      return "prefill";
    case TeRole::kDecode:
      return "decode";
  }
  return "colocated";
}

std::optional<TeRole> parse_te_role(std::string_view name) {
  if (name == "colocated") return TeRole::kColocated;
  if (name == "prefill") return TeRole::kPrefill;
  if (name == "decode") return TeRole::kDecode;
  return std::nullopt;
}

const TeInfo* FleetSnapshot::find(std::string_view id) const {
  for (const TeInfo& te : tes) {
    if (te.id == id) return &te;
  }
  return nullptr;
}

}  // namespace keel::cluster
