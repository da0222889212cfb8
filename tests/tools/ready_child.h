// Starting a keel child process under a test's ProcessSupervisor and reading its ready line's
// port, as the cluster tests do for gateways, JEs and TEs they start themselves.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "proc/process_supervisor.h"

namespace keel::testing {

// Spawns `argv` as child `name` of `sup` (60 s to print its ready line); returns the ready line's
// port (0 when it did not start: the failure is recorded) and sets *pid.
int start_ready_child(proc::ProcessSupervisor& sup, const std::string& name,
                      std::vector<std::string> argv, pid_t* pid);

}  // namespace keel::testing
