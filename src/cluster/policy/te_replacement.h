// The cluster manager's replacement rule: which of the task executors (TEs) it started must be
// killed and replaced, given a job executor's fleet snapshot (TeInfo::state from
// health::classify) and the children that exited on their own. A TE is replaced once: a hung or
// dead TE the manager knows (by control address) and has not replaced yet; a TE the JE does not
// list, or lists as healthy or busy, is left alone. A replacement keeps the TE's role; it comes
// from the warm pool when one has an idle TE (a warm TE binds to any role), else from a cold start.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "cluster/health/te_health.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/te_spec.h"

namespace keel::cluster {

// A TE the manager started (and would replace).
struct ManagedTe {
  std::string name;     // its supervisor child name (also its spec's id)
  std::string address;  // its control address "127.0.0.1:port"
  pid_t pid = 0;        // its process (supervised)
  // How it was started (executor_launch.h): a cold replacement reuses both under its own id.
  std::vector<std::string> keel_command;
  TeSpec spec;
  TeRole role = TeRole::kColocated;
  bool replaced = false;  // a replacement was started (or this one is already gone for good)
};

enum class ReplaceHow { kWarmPool, kColdStart };

struct ReplaceAction {
  size_t te_idx = 0;                               // into the managed list
  health::TeState state = health::TeState::kDead;  // why (hung or dead)
  ReplaceHow how = ReplaceHow::kColdStart;
};

// The replacements `fleet` calls for. `warm_idle`: idle warm-pool TEs (each serves one
// replacement, in order).
[[nodiscard]] std::vector<ReplaceAction> decide_replacements(const FleetSnapshot& fleet,
                                                             const std::vector<ManagedTe>& managed,
                                                             int warm_idle);

// A cold replacement's spec: `spec` under the id `name`.
[[nodiscard]] TeSpec replacement_spec(TeSpec spec, const std::string& name);

}  // namespace keel::cluster
