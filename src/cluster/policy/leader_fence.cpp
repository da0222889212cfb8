// LeaderFence; see leader_fence.h.
#include "cluster/policy/leader_fence.h"

namespace keel::cluster {

Status LeaderFence::admit(const std::string& election, int64_t token) {
  if (token < 0) return Status::invalid_argument("fencing token " + std::to_string(token) + " < 0");
  int64_t& highest = highest_[election];
  if (token < highest) {
    ++refused_;
    return Status::failed_precondition("stale cluster manager: its fencing token in '" + election +
                                       "' is " + std::to_string(token) +
                                       ", and a manager with token " + std::to_string(highest) +
                                       " has led since");
  }
  highest = token;
  return {};
}

int64_t LeaderFence::highest(const std::string& election) const {
  const auto it = highest_.find(election);
  return it == highest_.end() ? 0 : it->second;
}

}  // namespace keel::cluster
