// te_child: the supervised child that runs one task executor from its TeSpec — `keel te --spec -`
// with the encoded spec on its stdin (te_spec.h), named by the spec's id. What every starter of
// TEs uses (cluster up, the warm pool, the replacer, a node agent), so a TE's configuration never
// travels as command-line flags.
//
// Thread safety: a pure function.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cluster/te_spec.h"
#include "proc/process_supervisor.h"

namespace keel::cluster {

// `keel_command`: what runs keel — its path, possibly behind a prefix such as
// `ip netns exec NS` (a TE on another host's network namespace).
[[nodiscard]] proc::ChildSpec te_child(const std::vector<std::string>& keel_command,
                                       const TeSpec& spec, std::chrono::milliseconds ready_timeout);

}  // namespace keel::cluster
