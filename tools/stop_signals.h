// The signals that stop a keel process (SIGTERM, SIGINT, SIGHUP): blocked in the calling thread
// and every thread it starts afterwards, so the main thread can sigwait for them and drain.
#pragma once

#include <signal.h>

namespace keel::cli {

// Blocks the stop signals (and ignores SIGPIPE); returns the set to sigwait on.
sigset_t block_stop_signals();
const char* signal_name(int sig);

}  // namespace keel::cli
