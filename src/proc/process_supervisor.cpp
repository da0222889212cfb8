// ProcessSupervisor (process_supervisor.h): spawn and the ready wait, the death watch, stopping
// with SIGTERM → grace → SIGKILL, and line forwarding. Launching lives in child_launch.cpp, pipe
// draining in output_drain.cpp, reaping in child_exit.cpp.
#include "proc/process_supervisor.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "core/log.h"
#include "proc/child_launch.h"
#include "proc/ready_line.h"

namespace keel::proc {

namespace {

using SteadyTime = std::chrono::steady_clock;

// How often spawn() checks whether a child that has not printed its ready line has exited.
constexpr std::chrono::milliseconds kReadyPollSlice{20};
// How long a SIGKILLed child may take to be reaped before we call it stuck.
constexpr std::chrono::milliseconds kKillWait{10000};

std::string describe_child(std::string_view name, pid_t pid) {
  return "child '" + std::string(name) + "' (pid " + std::to_string(pid) + ")";
}

// SIGKILL and reap a child we have not handed out; waits without bound only if the kernel has
// not delivered SIGKILL within kKillWait (a process stuck in uninterruptible sleep).
void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  if (reap_within(pid, kKillWait)) return;
  KEEL_LOG_ERROR("pid {} did not die within {} ms of SIGKILL; waiting", pid, kKillWait.count());
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

ProcessSupervisor::ProcessSupervisor(SupervisorOptions options) : options_(std::move(options)) {}

ProcessSupervisor::~ProcessSupervisor() {
  Result<std::vector<ChildExit>> exits = stop_all(options_.destructor_grace);
  if (!exits) KEEL_LOG_ERROR("process supervisor: {}", exits.error().to_string());
}

Result<Child> ProcessSupervisor::spawn(const ChildSpec& spec) {
  if (spec.name.empty()) return Status::invalid_argument("child spec has no name");
  const std::string who = "child '" + spec.name + "'";
  if (find(spec.name)) return Status::invalid_argument(who + " is already running");
  if (spec.ready_timeout <= std::chrono::milliseconds::zero()) {
    return Status::invalid_argument(who + ": ready_timeout must be positive");
  }
  LaunchSpec launch;
  launch.argv = spec.argv;
  launch.env = spec.env;
  launch.stdin_bytes = spec.stdin_bytes;
  launch.parent_death_signal = options_.parent_death_signal;
  Result<LaunchedChild> launched = launch_child(launch);
  if (!launched) return launched.error().with_prefix("starting " + who);

  auto drain = std::make_unique<OutputDrain>(
      launched->stdout_fd, launched->stderr_fd,
      [this, name = spec.name](std::string_view line) { forward_line(name, line); });
  Result<Child> child = await_ready(spec, launched->pid, *drain);
  if (!child) return child.error();
  children_.push_back(Record{*child, std::move(drain)});
  return child;
}

Result<Child> ProcessSupervisor::await_ready(const ChildSpec& spec, pid_t pid, OutputDrain& drain) {
  const std::string who = describe_child(spec.name, pid);
  const SteadyTime::time_point deadline = SteadyTime::now() + spec.ready_timeout;
  for (;;) {
    const SteadyTime::time_point slice_end =
        std::min(deadline, SteadyTime::now() + kReadyPollSlice);
    if (std::optional<std::string> line = drain.wait_ready_line(slice_end)) {
      Result<nlohmann::json> payload = parse_ready_line(*line);
      if (payload) return Child{spec.name, pid, *std::move(payload)};
      kill_and_reap(pid);
      drain.finish();
      return payload.error().with_prefix(who + " printed a malformed ready line");
    }
    if (std::optional<int> status = reap_now(pid)) {
      drain.finish();
      const ChildExit exit = child_exit_from_wait_status(spec.name, pid, *status);
      return Status::unavailable(who + " " + exit.describe() + " before it was ready");
    }
    if (SteadyTime::now() >= deadline) {
      kill_and_reap(pid);
      drain.finish();
      return Status::unavailable(who + " did not print KEEL_READY within " +
                                 std::to_string(spec.ready_timeout.count()) + " ms; killed");
    }
  }
}

std::vector<ChildExit> ProcessSupervisor::poll_exits() {
  std::vector<ChildExit> exits;
  for (size_t i = 0; i < children_.size();) {
    if (std::optional<int> status = reap_now(children_[i].child.pid)) {
      exits.push_back(finish_record(children_.begin() + static_cast<ptrdiff_t>(i), *status,
                                    /*expected=*/false));
    } else {
      ++i;
    }
  }
  return exits;
}

Result<ChildExit> ProcessSupervisor::stop(std::string_view name, std::chrono::milliseconds grace) {
  std::optional<Child> child = find(name);
  if (!child) return Status::not_found("no supervised child named '" + std::string(name) + "'");
  return stop(child->pid, grace);
}

Result<ChildExit> ProcessSupervisor::stop(pid_t pid, std::chrono::milliseconds grace) {
  auto it = find_record(pid);
  if (it == children_.end()) {
    return Status::not_found("pid " + std::to_string(pid) + " is not a supervised child");
  }
  if (std::optional<int> status = reap_now(pid)) {
    return finish_record(it, *status, /*expected=*/false);  // it had already ended on its own
  }
  ::kill(pid, SIGTERM);
  ::kill(pid, SIGCONT);  // a stopped child acts on SIGTERM only once continued
  std::optional<int> status = reap_within(pid, grace);
  if (!status) {
    ::kill(pid, SIGKILL);
    status = reap_within(pid, kKillWait);
  }
  if (!status) {
    return Status::internal(describe_child(it->child.name, pid) + " survived SIGKILL for " +
                            std::to_string(kKillWait.count()) + " ms");
  }
  return finish_record(it, *status, /*expected=*/true);
}

Result<std::vector<ChildExit>> ProcessSupervisor::stop_all_in_order(
    const std::vector<std::string>& names, std::chrono::milliseconds grace) {
  std::vector<ChildExit> exits;
  Status first_error;
  for (const std::string& name : names) {
    std::optional<Child> child = find(name);
    if (!child) continue;
    Result<ChildExit> exit = stop(child->pid, grace);
    if (exit) {
      exits.push_back(*std::move(exit));
    } else if (first_error.ok()) {
      first_error = exit.error();
    }
  }
  Result<std::vector<ChildExit>> rest = stop_all(grace);
  if (rest) {
    exits.insert(exits.end(), rest->begin(), rest->end());
  } else if (first_error.ok()) {
    first_error = rest.error();
  }
  if (!first_error.ok()) return first_error;
  return exits;
}

Result<std::vector<ChildExit>> ProcessSupervisor::stop_all(std::chrono::milliseconds grace) {
  std::vector<ChildExit> exits = poll_exits();  // those that ended on their own
  // Reaps whatever has ended among the children still held, until none is left or `until`.
  auto reap_until = [&](SteadyTime::time_point until) {
    std::chrono::microseconds nap(200);
    for (;;) {
      for (size_t i = 0; i < children_.size();) {
        if (std::optional<int> status = reap_now(children_[i].child.pid)) {
          exits.push_back(finish_record(children_.begin() + static_cast<ptrdiff_t>(i), *status,
                                        /*expected=*/true));
        } else {
          ++i;
        }
      }
      if (children_.empty() || SteadyTime::now() >= until) return;
      std::this_thread::sleep_for(nap);
      nap = std::min<std::chrono::microseconds>(nap * 2, std::chrono::milliseconds(10));
    }
  };
  for (const Record& r : children_) {
    ::kill(r.child.pid, SIGTERM);
    ::kill(r.child.pid, SIGCONT);
  }
  reap_until(SteadyTime::now() + grace);
  for (const Record& r : children_) ::kill(r.child.pid, SIGKILL);
  reap_until(SteadyTime::now() + kKillWait);
  if (!children_.empty()) {
    return Status::internal(
        describe_child(children_.front().child.name, children_.front().child.pid) +
        " survived SIGKILL");
  }
  return exits;
}

Status ProcessSupervisor::signal(pid_t pid, int sig) {
  if (find_record(pid) == children_.end()) {
    return Status::not_found("pid " + std::to_string(pid) + " is not a supervised child");
  }
  if (::kill(pid, sig) != 0) {
    return Status::io_error("kill(" + std::to_string(pid) + ", " + std::to_string(sig) +
                            "): " + std::strerror(errno));
  }
  return Status::ok_status();
}

std::vector<Child> ProcessSupervisor::children() const {
  std::vector<Child> out;
  out.reserve(children_.size());
  for (const Record& r : children_) out.push_back(r.child);
  return out;
}

std::optional<Child> ProcessSupervisor::find(std::string_view name) const {
  for (const Record& r : children_) {
    if (r.child.name == name) return r.child;
  }
  return std::nullopt;
}

std::vector<ProcessSupervisor::Record>::iterator ProcessSupervisor::find_record(pid_t pid) {
  return std::find_if(children_.begin(), children_.end(),
                      [pid](const Record& r) { return r.child.pid == pid; });
}

ChildExit ProcessSupervisor::finish_record(std::vector<Record>::iterator it, int wait_status,
                                           bool expected) {
  ChildExit exit = child_exit_from_wait_status(it->child.name, it->child.pid, wait_status);
  exit.expected = expected;
  it->drain->finish();  // the child is gone: forward what it left in the pipes, join the thread
  children_.erase(it);
  return exit;
}

void ProcessSupervisor::forward_line(std::string_view name, std::string_view line) {
  MutexLock lock(sink_mu_);
  if (options_.sink) {
    options_.sink(name, line);
    return;
  }
  std::string text;
  text.reserve(name.size() + line.size() + 4);
  text.append("[").append(name).append("] ").append(line).append("\n");
  write_all(STDERR_FILENO, text);
}

}  // namespace keel::proc
