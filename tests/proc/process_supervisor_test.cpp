// ProcessSupervisor with /bin/sh children: the ready line, start timeouts and early exits (the
// child is reaped, the error names it), SIGTERM → SIGKILL escalation, ordered stops, forwarded
// output, the death watch, fault-injection signals, no child left after destruction, and children
// dying with their supervisor. Every test bounds its own time.
#include "proc/process_supervisor.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <mutex>
#include <thread>

#include "proc/ready_line.h"

namespace keel::proc {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

ChildSpec sh_child(std::string name, std::string script,
                   milliseconds timeout = milliseconds(5000)) {
  return ChildSpec{.name = std::move(name),
                   .argv = {"/bin/sh", "-c", std::move(script)},
                   .env = {},
                   .ready_timeout = timeout};
}

int64_t ms_since(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

bool pid_gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

// A sink that keeps "name|line" strings.
class Lines {
 public:
  SupervisorOptions options() {
    SupervisorOptions o;
    o.sink = [this](std::string_view name, std::string_view line) {
      std::lock_guard lock(mu_);
      lines_.push_back(std::string(name) + "|" + std::string(line));
    };
    return o;
  }
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu_);
    return lines_;
  }
  bool contains(const std::string& entry) {
    std::vector<std::string> lines = snapshot();
    return std::find(lines.begin(), lines.end(), entry) != lines.end();
  }
  bool wait_for(const std::string& entry, milliseconds timeout) {
    const Clock::time_point deadline = Clock::now() + timeout;
    while (!contains(entry)) {
      if (Clock::now() >= deadline) return false;
      std::this_thread::sleep_for(milliseconds(5));
    }
    return true;
  }
  // The pid a child printed as "pid=N" (0 when none).
  pid_t printed_pid(const std::string& name) {
    for (const std::string& line : snapshot()) {
      const std::string prefix = name + "|pid=";
      if (line.starts_with(prefix))
        return static_cast<pid_t>(std::stoi(line.substr(prefix.size())));
    }
    return 0;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

// Options whose sink drops every line.
SupervisorOptions quiet() {
  SupervisorOptions o;
  o.sink = [](std::string_view, std::string_view) {};
  return o;
}

constexpr const char* kServe = "echo 'KEEL_READY {}'; exec sleep 30";

TEST(ProcessSupervisorTest, SpawnReturnsTheParsedReadyLine) {
  const Clock::time_point start = Clock::now();
  Lines lines;
  ProcessSupervisor sup(lines.options());
  Result<Child> child = sup.spawn(
      sh_child("te-0", "echo 'KEEL_READY {\"role\":\"te\",\"port\":4321}'; exec sleep 30"));
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  EXPECT_EQ(child->name, "te-0");
  EXPECT_GT(child->pid, 0);
  EXPECT_EQ(child->ready["role"], "te");
  EXPECT_EQ(*ready_port(child->ready), 4321);
  ASSERT_EQ(sup.children().size(), 1u);
  EXPECT_EQ(sup.find("te-0")->pid, child->pid);

  Result<ChildExit> exit = sup.stop("te-0", milliseconds(3000));
  ASSERT_TRUE(exit.ok()) << exit.status().to_string();
  EXPECT_TRUE(exit->killed_by(SIGTERM)) << exit->describe();
  EXPECT_TRUE(exit->expected);
  EXPECT_TRUE(pid_gone(child->pid));
  EXPECT_TRUE(sup.children().empty());
  EXPECT_LT(ms_since(start), 5000);
}

TEST(ProcessSupervisorTest, EnvAdditionsReachTheChild) {
  ProcessSupervisor sup(quiet());
  ChildSpec spec = sh_child("env", "echo \"KEEL_READY {\\\"x\\\":$KEEL_TEST_X}\"; exec sleep 30");
  spec.env = {{"KEEL_TEST_X", "42"}};
  Result<Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  EXPECT_EQ(child->ready["x"], 42);
}

// A spec on stdin: the child reads exactly the bytes given, then end of file; without stdin_bytes
// its stdin is /dev/null (reads nothing).
TEST(ProcessSupervisorTest, StdinBytesReachTheChildThenEndOfFile) {
  ProcessSupervisor sup(quiet());
  ChildSpec spec =
      sh_child("stdin", "n=$(wc -c); echo \"KEEL_READY {\\\"n\\\":$n}\"; exec sleep 30");
  spec.stdin_bytes = std::string(100000, 'x');  // above the default 64 KiB pipe buffer
  Result<Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  EXPECT_EQ(child->ready["n"], 100000);
  ChildSpec none =
      sh_child("no-stdin", "n=$(wc -c); echo \"KEEL_READY {\\\"n\\\":$n}\"; exec sleep 30");
  child = sup.spawn(none);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  EXPECT_EQ(child->ready["n"], 0);
  ChildSpec huge = sh_child("huge", kServe);
  huge.stdin_bytes = std::string(size_t{64} << 20, 'x');  // above any pipe-max-size
  Result<Child> refused = sup.spawn(huge);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().to_string();
}

TEST(ProcessSupervisorTest, InheritedFdsAreClosedInTheChild) {
  const int leaked = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  ASSERT_GE(leaked, 3);
  ProcessSupervisor sup(quiet());
  const std::string fd = std::to_string(leaked);
  Result<Child> child =
      sup.spawn(sh_child("fds", "if [ -e /proc/self/fd/" + fd + " ]; then o=1; else o=0; fi; " +
                                    "echo \"KEEL_READY {\\\"open\\\":$o}\"; exec sleep 30"));
  ::close(leaked);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  EXPECT_EQ(child->ready["open"], 0);
}

TEST(ProcessSupervisorTest, NoReadyLineTimesOutAndKillsTheChild) {
  const Clock::time_point start = Clock::now();
  Lines lines;
  ProcessSupervisor sup(lines.options());
  Result<Child> child =
      sup.spawn(sh_child("mute", "echo pid=$$ >&2; exec sleep 30", milliseconds(300)));
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(child.error().message().find("'mute'"), std::string::npos) << child.error().message();
  EXPECT_NE(child.error().message().find("300 ms"), std::string::npos) << child.error().message();
  const pid_t pid = lines.printed_pid("mute");
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(pid_gone(pid));  // killed and reaped, not a zombie
  EXPECT_TRUE(sup.children().empty());
  EXPECT_GE(ms_since(start), 300);
  EXPECT_LT(ms_since(start), 3000);
}

TEST(ProcessSupervisorTest, ExitBeforeReadyReportsHowTheChildEnded) {
  const Clock::time_point start = Clock::now();
  ProcessSupervisor sup(quiet());
  Result<Child> exited = sup.spawn(sh_child("quitter", "exit 3"));
  ASSERT_FALSE(exited.ok());
  EXPECT_EQ(exited.error().code(), StatusCode::kUnavailable);
  EXPECT_NE(exited.error().message().find("'quitter'"), std::string::npos);
  EXPECT_NE(exited.error().message().find("exited with status 3"), std::string::npos)
      << exited.error().message();

  Result<Child> killed = sup.spawn(sh_child("crasher", "kill -9 $$"));
  ASSERT_FALSE(killed.ok());
  EXPECT_NE(killed.error().message().find("killed by signal SIGKILL"), std::string::npos)
      << killed.error().message();
  EXPECT_LT(ms_since(start), 3000);  // noticed long before the 5 s ready timeout
}

TEST(ProcessSupervisorTest, MalformedReadyLineIsInvalidArgument) {
  Lines lines;
  ProcessSupervisor sup(lines.options());
  Result<Child> child =
      sup.spawn(sh_child("garbled", "echo pid=$$ >&2; echo 'KEEL_READY {oops'; exec sleep 30"));
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(child.error().message().find("'garbled'"), std::string::npos);
  const pid_t pid = lines.printed_pid("garbled");
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(pid_gone(pid));
}

TEST(ProcessSupervisorTest, BadSpecsAreRejected) {
  ProcessSupervisor sup(quiet());
  Result<Child> missing = sup.spawn(ChildSpec{.name = "ghost", .argv = {"/nonexistent/keel-x"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.error().message().find("'ghost'"), std::string::npos);
  Result<Child> not_in_path =
      sup.spawn(ChildSpec{.name = "ghost", .argv = {"keel-no-such-program-in-path"}});
  ASSERT_FALSE(not_in_path.ok());
  EXPECT_EQ(not_in_path.error().code(), StatusCode::kNotFound);
  EXPECT_FALSE(sup.spawn(ChildSpec{.name = "", .argv = {"/bin/true"}}).ok());
  EXPECT_FALSE(sup.spawn(ChildSpec{.name = "empty", .argv = {}}).ok());

  ASSERT_TRUE(sup.spawn(sh_child("twin", kServe)).ok());
  Result<Child> twin = sup.spawn(sh_child("twin", kServe));
  ASSERT_FALSE(twin.ok());
  EXPECT_EQ(twin.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sup.children().size(), 1u);
}

TEST(ProcessSupervisorTest, StopEscalatesToSigkillForAChildIgnoringSigterm) {
  ProcessSupervisor sup(quiet());
  Result<Child> child = sup.spawn(sh_child("stubborn", "trap '' TERM; " + std::string(kServe)));
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  const Clock::time_point start = Clock::now();
  Result<ChildExit> exit = sup.stop(child->pid, milliseconds(300));
  const int64_t took = ms_since(start);
  ASSERT_TRUE(exit.ok()) << exit.status().to_string();
  EXPECT_TRUE(exit->killed_by(SIGKILL)) << exit->describe();
  EXPECT_GE(took, 300);
  EXPECT_LT(took, 3000);
  EXPECT_TRUE(pid_gone(child->pid));
  EXPECT_EQ(sup.stop(child->pid, milliseconds(10)).status().code(), StatusCode::kNotFound);
}

TEST(ProcessSupervisorTest, StopOfAStoppedChildStillUsesSigterm) {
  ProcessSupervisor sup(quiet());
  Result<Child> child = sup.spawn(sh_child("frozen", kServe));
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  ASSERT_TRUE(sup.signal(child->pid, SIGSTOP).ok());
  const Clock::time_point start = Clock::now();
  Result<ChildExit> exit = sup.stop("frozen", milliseconds(5000));
  ASSERT_TRUE(exit.ok()) << exit.status().to_string();
  EXPECT_TRUE(exit->killed_by(SIGTERM)) << exit->describe();
  EXPECT_LT(ms_since(start), 3000);
}

TEST(ProcessSupervisorTest, StopAllInOrderStopsNamedChildrenFirst) {
  const Clock::time_point start = Clock::now();
  Lines lines;
  ProcessSupervisor sup(lines.options());
  const std::string polite =
      "trap 'echo bye; exit 0' TERM; echo 'KEEL_READY {}'; while :; do sleep 0.05; done";
  for (const char* name : {"te-0", "te-1", "je-0", "gateway"}) {
    ASSERT_TRUE(sup.spawn(sh_child(name, polite)).ok()) << name;
  }
  Result<std::vector<ChildExit>> exits =
      sup.stop_all_in_order({"gateway", "je-0", "no-such-child"}, milliseconds(3000));
  ASSERT_TRUE(exits.ok()) << exits.status().to_string();
  ASSERT_EQ(exits->size(), 4u);
  EXPECT_EQ((*exits)[0].name, "gateway");
  EXPECT_EQ((*exits)[1].name, "je-0");
  for (const ChildExit& exit : *exits) {
    EXPECT_EQ(exit.exit_code, 0) << exit.name << ": " << exit.describe();
    EXPECT_TRUE(lines.contains(exit.name + "|bye")) << exit.name;
  }
  // The gateway said goodbye before the JE, and the JE before any TE.
  const std::vector<std::string> seen = lines.snapshot();
  auto pos = [&](const std::string& entry) {
    return std::find(seen.begin(), seen.end(), entry) - seen.begin();
  };
  EXPECT_LT(pos("gateway|bye"), pos("je-0|bye"));
  EXPECT_LT(pos("je-0|bye"), pos("te-0|bye"));
  EXPECT_LT(pos("je-0|bye"), pos("te-1|bye"));
  EXPECT_TRUE(sup.children().empty());
  EXPECT_LT(ms_since(start), 8000);
}

TEST(ProcessSupervisorTest, OutputLinesAreForwardedWithTheChildsName) {
  Lines lines;
  ProcessSupervisor sup(lines.options());
  Result<Child> child = sup.spawn(sh_child(
      "talker", "echo hello; echo oops >&2; echo 'KEEL_READY {}'; echo after; exec sleep 30"));
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  ASSERT_TRUE(lines.wait_for("talker|after", milliseconds(3000)));
  EXPECT_TRUE(lines.contains("talker|hello"));
  EXPECT_TRUE(lines.contains("talker|oops"));
  EXPECT_TRUE(lines.contains("talker|KEEL_READY {}"));
}

TEST(ProcessSupervisorTest, DefaultSinkPrefixesLinesOnStderr) {
  ::testing::internal::CaptureStderr();
  {
    ProcessSupervisor sup;
    Result<Child> child = sup.spawn(sh_child("loud", "echo hi-there; " + std::string(kServe)));
    EXPECT_TRUE(child.ok()) << child.status().to_string();
    EXPECT_TRUE(sup.stop("loud", milliseconds(3000)).ok());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("[loud] hi-there\n"), std::string::npos) << err;
}

TEST(ProcessSupervisorTest, PollExitsReportsUnexpectedExits) {
  const Clock::time_point start = Clock::now();
  ProcessSupervisor sup(quiet());
  ASSERT_TRUE(sup.spawn(sh_child("flaky", "echo 'KEEL_READY {}'; sleep 0.2; exit 5")).ok());
  Result<Child> victim = sup.spawn(sh_child("victim", kServe));
  ASSERT_TRUE(victim.ok());
  ASSERT_TRUE(sup.signal(victim->pid, SIGKILL).ok());

  std::vector<ChildExit> exits;
  while (exits.size() < 2 && ms_since(start) < 5000) {
    std::vector<ChildExit> batch = sup.poll_exits();
    exits.insert(exits.end(), batch.begin(), batch.end());
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(exits.size(), 2u);
  std::sort(exits.begin(), exits.end(),
            [](const ChildExit& a, const ChildExit& b) { return a.name < b.name; });
  EXPECT_EQ(exits[0].name, "flaky");
  EXPECT_EQ(exits[0].exit_code, 5);
  EXPECT_FALSE(exits[0].expected);
  EXPECT_EQ(exits[1].name, "victim");
  EXPECT_TRUE(exits[1].killed_by(SIGKILL));
  EXPECT_TRUE(sup.children().empty());
  EXPECT_EQ(sup.signal(victim->pid, SIGCONT).code(), StatusCode::kNotFound);  // reaped: not ours
  EXPECT_TRUE(sup.poll_exits().empty());
}

TEST(ProcessSupervisorTest, DestructorLeavesNoChildAlive) {
  const Clock::time_point start = Clock::now();
  std::vector<pid_t> pids;
  {
    SupervisorOptions options = quiet();
    options.destructor_grace = milliseconds(200);
    ProcessSupervisor sup(options);
    for (const auto& [name, script] :
         {std::pair{"plain", std::string(kServe)},
          std::pair{"stubborn", "trap '' TERM; " + std::string(kServe)}}) {
      Result<Child> child = sup.spawn(sh_child(name, script));
      ASSERT_TRUE(child.ok()) << child.status().to_string();
      pids.push_back(child->pid);
    }
  }
  for (pid_t pid : pids) EXPECT_TRUE(pid_gone(pid)) << pid;
  EXPECT_LT(ms_since(start), 5000);
}

// Forks a process that runs its own supervisor with one child, kills that process with SIGKILL
// and checks the orphaned child gets SIGTERM. The test process becomes a child subreaper for the
// duration, so the orphan is re-parented to it and can be reaped (and checked) here.
TEST(ProcessSupervisorTest, ChildrenDieWithTheirSupervisor) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  const pid_t sub = ::fork();
  ASSERT_GE(sub, 0);
  if (sub == 0) {  // the sub-supervisor: never returns into the test framework
    ::close(pipe_fds[0]);
    ProcessSupervisor sup;
    Result<Child> child = sup.spawn(sh_child("orphan", kServe));
    const pid_t pid = child.ok() ? child->pid : -1;
    [[maybe_unused]] const ssize_t n = ::write(pipe_fds[1], &pid, sizeof(pid));
    for (;;) ::pause();
  }
  ::close(pipe_fds[1]);
  pid_t grandchild = -1;
  const ssize_t n = ::read(pipe_fds[0], &grandchild, sizeof(grandchild));
  ::close(pipe_fds[0]);
  ::kill(sub, SIGKILL);
  ::waitpid(sub, nullptr, 0);
  std::optional<int> status;
  if (n == sizeof(grandchild) && grandchild > 0) {
    status = reap_within(grandchild, milliseconds(5000));
    if (!status) {  // do not leave it behind when the check fails
      ::kill(grandchild, SIGKILL);
      ::waitpid(grandchild, nullptr, 0);
    }
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(n, static_cast<ssize_t>(sizeof(grandchild)));
  ASSERT_GT(grandchild, 0);
  ASSERT_TRUE(status.has_value()) << "the orphan outlived its supervisor by 5 s";
  EXPECT_TRUE(WIFSIGNALED(*status) && WTERMSIG(*status) == SIGTERM);
}

}  // namespace
}  // namespace keel::proc
