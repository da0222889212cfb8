// SCHED_IDLE / nice 19 for the calling thread (thread_priority.h).
#include "core/thread_priority.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace keel {

Status lower_to_idle_priority() {
  sched_param param{};
  param.sched_priority = 0;
  if (sched_setscheduler(0, SCHED_IDLE, &param) == 0) return Status();  // 0: this thread
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  if (setpriority(PRIO_PROCESS, tid, 19) == 0) return Status();
  return Status::io_error(std::string("cannot lower the thread's priority: ") +
                          std::strerror(errno));
}

bool runs_at_idle_priority() { return sched_getscheduler(0) == SCHED_IDLE; }

}  // namespace keel
