// How a supervised child ended, and the bounded waitpid loops that learn it. Every pid handed to
// these functions must be a child of the calling process that has not been reaped yet; once one of
// them returns a status the pid is reaped and may be reused by the kernel, so it must not be
// signalled again.
//
// Thread safety: free functions and a plain struct.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>

namespace keel::proc {

struct ChildExit {
  std::string name;      // the ChildSpec name
  pid_t pid = 0;         // the pid it had (already reaped)
  int exit_code = -1;    // its exit status when it exited; -1 when a signal ended it
  int term_signal = 0;   // the signal that ended it; 0 when it exited
  bool expected = true;  // false when found by poll_exits (nobody asked it to stop)

  [[nodiscard]] bool killed_by(int sig) const { return term_signal == sig; }
  // "exited with status 3" or "killed by signal SIGKILL".
  [[nodiscard]] std::string describe() const;
};

// Decodes a waitpid status.
[[nodiscard]] ChildExit child_exit_from_wait_status(std::string name, pid_t pid, int status);

// waitpid(pid, WNOHANG): the wait status when the child has ended (and is now reaped).
[[nodiscard]] std::optional<int> reap_now(pid_t pid);

// Polls waitpid(pid, WNOHANG) with short sleeps until the child is reaped or `timeout` passes.
[[nodiscard]] std::optional<int> reap_within(pid_t pid, std::chrono::milliseconds timeout);

}  // namespace keel::proc
