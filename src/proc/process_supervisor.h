// ProcessSupervisor: starts and stops the processes of `keel cluster up` (task executors, job
// executors, the gateway) on one machine, and owns them until they are reaped.
//
// Rules it keeps: children are signalled by pid only, and only while this supervisor has not yet
// reaped them (so a pid is never reused under us); every start is bounded by the child's
// ready_timeout; a child that fails to become ready is killed and reaped before spawn() returns;
// every forked pid is reaped on every path (no zombies); children get SIGTERM (configurable) when
// the supervisor dies, via PR_SET_PDEATHSIG; the destructor stops what is still running. On any
// failure, the caller stops everything started so far with stop_all() (or by destroying this).
//
// Ready protocol (ready_line.h): spawn() returns once the child prints `KEEL_READY {json}` on its
// stdout. From spawn() on, a drain thread per child forwards every stdout/stderr line to the sink
// (default: "[name] line" on the supervisor's stderr), so the child's pipes never fill up.
//
// Thread safety: not thread-safe. One owning thread calls every method, and it must be a thread
// that outlives the children (the kernel's parent-death signal fires when the *forking thread*
// exits). The sink is called from drain threads, one call at a time.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/result.h"
#include "core/status.h"
#include "proc/child_exit.h"
#include "proc/output_drain.h"

namespace keel::proc {

struct ChildSpec {
  std::string name;               // unique among live children; prefixes forwarded lines
  std::vector<std::string> argv;  // argv[0] is the program; searched in PATH unless it has a '/'
  std::vector<std::pair<std::string, std::string>> env;  // added to the supervisor's environment
  std::chrono::milliseconds ready_timeout{10000};        // fork to ready line, > 0
  std::string stdin_bytes;  // the child's stdin (LaunchSpec::stdin_bytes); "" = /dev/null
};

struct Child {
  std::string name;
  pid_t pid = 0;
  nlohmann::json ready;  // the ready line's payload (an object); see ready_port()
};

struct SupervisorOptions {
  // Receives each line a child prints (stdout and stderr), from its drain thread; calls are
  // serialized. Null: "[name] line\n" written to the supervisor's stderr in one write.
  std::function<void(std::string_view name, std::string_view line)> sink;
  // Sent to each child when the thread that spawned it dies; 0 for none.
  int parent_death_signal = SIGTERM;
  // Grace between SIGTERM and SIGKILL for children still running at destruction.
  std::chrono::milliseconds destructor_grace{1000};
};

class ProcessSupervisor {
 public:
  explicit ProcessSupervisor(SupervisorOptions options = {});
  ~ProcessSupervisor();  // stop_all(options.destructor_grace)
  ProcessSupervisor(const ProcessSupervisor&) = delete;
  ProcessSupervisor& operator=(const ProcessSupervisor&) = delete;

  // Starts a child and waits for its ready line. Errors name the child: InvalidArgument (bad spec,
  // duplicate name, malformed ready line), NotFound (no such program), Unavailable (timed out, or
  // the child exited first — the message says how), IoError. On error the child is reaped.
  [[nodiscard]] Result<Child> spawn(const ChildSpec& spec);

  // Reaps children that ended without being asked to (expected == false), in start order; they
  // are no longer supervised afterwards. Never blocks.
  [[nodiscard]] std::vector<ChildExit> poll_exits();

  // SIGTERM (plus SIGCONT, so a stopped child can act on it), up to `grace` for it to exit, then
  // SIGKILL; reaps it and returns how it ended. NotFound for an unknown (or already reaped) child;
  // Internal if it survives SIGKILL for seconds (it stays supervised).
  [[nodiscard]] Result<ChildExit> stop(std::string_view name, std::chrono::milliseconds grace);
  [[nodiscard]] Result<ChildExit> stop(pid_t pid, std::chrono::milliseconds grace);

  // Stops the named children one after another in the given order (e.g. gateway, then JEs, then
  // TEs), skipping names no longer supervised, then everything else via stop_all(). Returns the
  // exits in the order they were reaped; the first error after trying every child.
  [[nodiscard]] Result<std::vector<ChildExit>> stop_all_in_order(
      const std::vector<std::string>& names, std::chrono::milliseconds grace);

  // SIGTERM to every child at once, a shared `grace`, then SIGKILL to the rest; reaps all.
  [[nodiscard]] Result<std::vector<ChildExit>> stop_all(std::chrono::milliseconds grace);

  // Sends `sig` to a supervised child (fault injection: SIGSTOP, SIGCONT, SIGKILL). NotFound for a
  // pid this supervisor does not hold; a child killed this way shows up in poll_exits().
  Status signal(pid_t pid, int sig);

  // The live (not yet reaped) children, in start order.
  [[nodiscard]] std::vector<Child> children() const;
  [[nodiscard]] std::optional<Child> find(std::string_view name) const;

 private:
  struct Record {
    Child child;
    std::unique_ptr<OutputDrain> drain;
  };

  Result<Child> await_ready(const ChildSpec& spec, pid_t pid, OutputDrain& drain);
  std::vector<Record>::iterator find_record(pid_t pid);
  ChildExit finish_record(std::vector<Record>::iterator it, int wait_status, bool expected);
  void forward_line(std::string_view name, std::string_view line);

  SupervisorOptions options_;
  std::vector<Record> children_;  // live children in start order
  // Guards no data: serializes the sink calls (options_.sink, or the default stderr writes) of
  // the drain threads, so a sink sees one line at a time.
  Mutex sink_mu_;
};

}  // namespace keel::proc
