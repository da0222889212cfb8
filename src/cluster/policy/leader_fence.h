// LeaderFence: a node agent's guard against a stale cluster manager. Each manager command carries
// its election's name and the fencing token of the leadership it was sent under
// (Membership::leadership_token: it grows with every new leadership of that election). Per
// election, the fence admits a command whose token is at least the highest it has admitted and
// refuses a lower one: a manager that stalled past its lease (a pause, not a cut network) and woke
// up still believing it leads is refused once its successor has spoken to this agent — a
// successor announces itself to every agent when it takes over (the `fence` call). Managers of
// other elections (other models sharing the agents) are fenced apart. Token 0 is a command sent
// outside any election; it is admitted only while that election has no token here.
//
// Pure; not thread-safe (the agent's command thread owns it).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/result.h"

namespace keel::cluster {

class LeaderFence {
 public:
  // Ok (and the token remembered when higher) or FailedPrecondition naming the election and both
  // tokens.
  Status admit(const std::string& election, int64_t token);
  // The highest token admitted for `election` (0: none).
  [[nodiscard]] int64_t highest(const std::string& election) const;
  [[nodiscard]] int64_t refused() const { return refused_; }

 private:
  std::map<std::string, int64_t> highest_;  // by election
  int64_t refused_ = 0;
};

}  // namespace keel::cluster
