// ExecutorProcesses: how the replacers start and stop the executors they manage — TEs and JEs
// as child processes of the manager (SupervisedProcesses over a proc::ProcessSupervisor), or a
// fake in unit tests, so the repair logic runs with no process.
//
// Thread safety: as the supervisor: the owner's thread (spawn and stop are its).
#pragma once

#include <sys/types.h>

#include "core/result.h"
#include "proc/process_supervisor.h"

namespace keel::control {

class ExecutorProcesses {
 public:
  virtual ~ExecutorProcesses() = default;
  // Starts `spec` (cluster::te_child / je_child) and returns once its ready line came.
  virtual Result<proc::Child> spawn(const proc::ChildSpec& spec) = 0;
  // SIGKILL at once, then reaps it (a TE whose jobs are re-driven must send nothing more).
  virtual void kill(pid_t pid) = 0;
  // SIGTERM, SIGKILL after a short grace, then reaps it.
  virtual void stop(pid_t pid) = 0;
};

class SupervisedProcesses final : public ExecutorProcesses {
 public:
  explicit SupervisedProcesses(proc::ProcessSupervisor* sup) : sup_(sup) {}
  Result<proc::Child> spawn(const proc::ChildSpec& spec) override { return sup_->spawn(spec); }
  void kill(pid_t pid) override;
  void stop(pid_t pid) override;

 private:
  proc::ProcessSupervisor* sup_;  // not owned
};

}  // namespace keel::control
