// te_child / je_child: the supervised child that runs one task or job executor from its spec —
// `keel te --id ID --spec -` or `keel je --id ID --spec -` with the encoded spec on its stdin
// (te_spec.h, je_spec.h), named by the spec's id. The id on the command line is a label for
// operators (`ps`, /proc) and must match the spec's; it carries no configuration. What every
// starter of executors uses (cluster up, the warm pool, the replacers, a node agent), so their
// configuration never travels as command-line flags.
//
// Thread safety: pure functions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "cluster/protocol/je_spec.h"
#include "cluster/protocol/te_spec.h"
#include "proc/process_supervisor.h"

namespace keel::cluster {

// `keel_command`: what runs keel — its path, possibly behind a prefix such as
// `ip netns exec NS` (an executor in another host's network namespace).
[[nodiscard]] proc::ChildSpec te_child(const std::vector<std::string>& keel_command,
                                       const TeSpec& spec, std::chrono::milliseconds ready_timeout);
[[nodiscard]] proc::ChildSpec je_child(const std::vector<std::string>& keel_command,
                                       const JeSpec& spec, std::chrono::milliseconds ready_timeout);

}  // namespace keel::cluster
