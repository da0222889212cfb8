// Names of TE roles, lookup in a fleet snapshot and the listed TEs (fleet.h).
#include "cluster/protocol/fleet.h"

#include <algorithm>

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

std::vector<size_t> listed_tes(const std::vector<TeInfo>& tes,
                               const std::vector<std::string>& forgotten) {
  std::vector<size_t> out;
  for (size_t i = 0; i < tes.size(); ++i) {
    if (std::find(forgotten.begin(), forgotten.end(), tes[i].address) == forgotten.end()) {
      out.push_back(i);
    }
  }
  return out;
}

}  // namespace keel::cluster
