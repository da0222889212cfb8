// Idle CPU priority for background threads: work such as fine-tuning that must give way to
// interactive requests on the same cores. Linux's SCHED_IDLE policy runs a thread only on CPU
// time no normal thread wants; where that is refused, the thread's nice value goes to 19 instead.
// Both are per thread (the thread id, not the process) and cannot be raised back without
// privileges, so call it on threads that do only background work.
//
// Thread safety: affects the calling thread only.
#pragma once

#include "core/status.h"

namespace keel {

// SCHED_IDLE for the calling thread, else nice 19; IoError when neither could be set.
Status lower_to_idle_priority();

// Whether the calling thread runs under SCHED_IDLE (for tests and logs).
[[nodiscard]] bool runs_at_idle_priority();

}  // namespace keel
