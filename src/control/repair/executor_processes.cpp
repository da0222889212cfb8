// SupervisedProcesses (see executor_processes.h).
#include "control/repair/executor_processes.h"

#include <signal.h>

#include <chrono>

#include "core/log.h"

namespace keel::control {
namespace {

// How long stop() waits for a process to exit before SIGKILL (one just killed exits at once).
constexpr std::chrono::milliseconds kReapWait{2000};

}  // namespace

void SupervisedProcesses::kill(pid_t pid) {
  (void)sup_->signal(pid, SIGKILL);
  stop(pid);
}

void SupervisedProcesses::stop(pid_t pid) {
  Result<proc::ChildExit> stopped = sup_->stop(pid, kReapWait);
  if (stopped.ok()) {
    KEEL_LOG_INFO("cluster: {} stopped: {}", stopped->name, stopped->describe());
  } else if (stopped.status().code() != StatusCode::kNotFound) {
    KEEL_LOG_WARN("cluster: stopping pid {}: {}", pid, stopped.status().message());
  }
}

}  // namespace keel::control
