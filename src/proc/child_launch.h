// launch_child: fork + execve of one supervised child, with its stdout and stderr on pipes.
// The child, before exec: gets its own process group (terminal signals reach only the supervisor,
// which then stops children in order); stdin from /dev/null, or a pipe holding
// LaunchSpec::stdin_bytes then end of file; a default signal mask and default
// dispositions; every inherited fd above 2 closed at exec; PR_SET_PDEATHSIG so it gets
// `parent_death_signal` when the forking *thread* ends (and exits at once if the parent died
// before prctl). Exec failures come back through a close-on-exec pipe as a Status.
//
// Thread safety: callable from any thread; the child dies with the thread that launched it.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "core/result.h"

namespace keel::proc {

struct LaunchSpec {
  std::vector<std::string> argv;  // argv[0] is the program; searched in PATH unless it has a '/'
  std::vector<std::pair<std::string, std::string>> env;  // set (or replaced) in the child
  int parent_death_signal = 0;                           // 0: none
  // Non-empty: the child's stdin yields these bytes, then end of file (how a versioned spec, such
  // as cluster::TeSpec, reaches a child instead of argv flags). At most the system's pipe-max-size
  // (1 MiB by default): written before the fork, so the parent never blocks on a child that does
  // not read. Larger is InvalidArgument.
  std::string stdin_bytes;
};

struct LaunchedChild {
  pid_t pid = 0;
  int stdout_fd = -1;  // read end, close-on-exec; owned by the caller
  int stderr_fd = -1;  // read end, close-on-exec; owned by the caller
};

// NotFound when the program does not exist or cannot be executed; IoError for other failures.
// On error nothing is left behind: a forked child has been reaped and all fds closed.
[[nodiscard]] Result<LaunchedChild> launch_child(const LaunchSpec& spec);

// The path of the running binary (/proc/self/exe), which keel re-runs as its own children (TEs,
// JEs, pipeline stages, expert members); "keel" (found on PATH) when it cannot be read.
[[nodiscard]] std::string self_exe();

}  // namespace keel::proc
