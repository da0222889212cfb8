// self_exe(): the path of the running keel binary (/proc/self/exe), which the cluster commands
// re-run as their children (TEs, JEs, stages); "keel" (found on PATH) when it cannot be read.
//
// Thread safety: a pure function of the process.
#pragma once

#include <string>

#include "proc/child_launch.h"

namespace keel::cli {

inline std::string self_exe() { return proc::self_exe(); }

}  // namespace keel::cli
