// The signals that stop a keel process (SIGTERM, SIGINT, SIGHUP): blocked in the calling thread
// and every thread it starts afterwards, so the main thread can sigwait for them and drain.
//
// Thread safety: block_stop_signals() from main() before any thread starts; signal_name is pure.
#pragma once

#include <signal.h>

namespace keel::proc {

// Blocks the stop signals (and ignores SIGPIPE); returns the set to sigwait on.
sigset_t block_stop_signals();
const char* signal_name(int sig);

}  // namespace keel::proc
