// ChildExit decoding and bounded reaping (child_exit.h).
#include "proc/child_exit.h"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace keel::proc {

std::string ChildExit::describe() const {
  if (term_signal == 0) return "exited with status " + std::to_string(exit_code);
  const char* abbrev = ::sigabbrev_np(term_signal);
  return "killed by signal " +
         (abbrev != nullptr ? "SIG" + std::string(abbrev) : std::to_string(term_signal));
}

ChildExit child_exit_from_wait_status(std::string name, pid_t pid, int status) {
  ChildExit exit;
  exit.name = std::move(name);
  exit.pid = pid;
  if (WIFEXITED(status)) {
    exit.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    exit.term_signal = WTERMSIG(status);
  }
  return exit;
}

std::optional<int> reap_now(pid_t pid) {
  int status = 0;
  for (;;) {
    const pid_t rc = ::waitpid(pid, &status, WNOHANG);
    if (rc == pid) return status;
    if (rc < 0 && errno == EINTR) continue;
    // 0: still running. ECHILD: not ours or already reaped, which the callers' invariants exclude;
    // report "still running" rather than invent a status.
    return std::nullopt;
  }
}

std::optional<int> reap_within(pid_t pid, std::chrono::milliseconds timeout) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::chrono::microseconds nap(200);
  for (;;) {
    if (std::optional<int> status = reap_now(pid)) return status;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::min<Clock::duration>(
        nap, std::chrono::duration_cast<Clock::duration>(deadline - now)));
    nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
  }
}

}  // namespace keel::proc
