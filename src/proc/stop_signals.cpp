// Stop signals (see stop_signals.h).
#include "proc/stop_signals.h"

#include <pthread.h>

namespace keel::proc {

sigset_t block_stop_signals() {
  // A closed peer or log pipe must not kill the process: writes fail with EPIPE instead.
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    default:
      return "a signal";
  }
}

}  // namespace keel::proc
