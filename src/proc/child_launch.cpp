// launch_child (child_launch.h). Everything the child needs (path, argv, envp) is built before
// fork: between fork and exec the child only makes async-signal-safe system calls.
#include "proc/child_launch.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

extern char** environ;

#include <filesystem>

namespace keel::proc {

namespace {

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif

std::string errno_text(int err) { return std::strerror(err); }

// The executable for argv[0]: itself when it has a '/', else the first PATH entry that holds it.
Result<std::string> resolve_program(const std::string& program) {
  if (program.empty()) return Status::invalid_argument("empty program name");
  if (program.find('/') != std::string::npos) return program;
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > start ? path.substr(start, end - start) : ".";
    const std::string candidate = dir + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return Status::not_found("program '" + program + "' not found in PATH");
}

// The parent's environment with `additions` set (replacing variables of the same name).
std::vector<std::string> build_env(const std::vector<std::pair<std::string, std::string>>& adds) {
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    const std::string_view key = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : adds) replaced = replaced || k == key;
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [k, v] : adds) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_array(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

struct Pipes {
  int out[2] = {-1, -1};
  int err[2] = {-1, -1};
  int exec_err[2] = {-1, -1};  // the child writes its errno here when exec fails
  int dev_null = -1;  // the child's stdin: /dev/null, or a pipe already holding stdin_bytes

  void close_all() {
    for (int* p : {out, err, exec_err}) {
      close_fd(p[0]);
      close_fd(p[1]);
    }
    close_fd(dev_null);
  }
};

// A pipe's read end that yields `bytes` then end of file. The bytes are written before the child
// exists, so they must fit the pipe's buffer (grown up to the system's pipe-max-size): the write
// never blocks and a child that never reads cannot stall the parent.
Result<int> stdin_pipe(const std::string& bytes) {
  int fds[2] = {-1, -1};
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::io_error("pipe2: " + errno_text(errno));
  const auto fail = [&fds](Status s) -> Result<int> {
    close_fd(fds[0]);
    close_fd(fds[1]);
    return s;
  };
  int capacity = ::fcntl(fds[1], F_GETPIPE_SZ);
  if (capacity >= 0 && static_cast<size_t>(capacity) < bytes.size()) {
    capacity = ::fcntl(fds[1], F_SETPIPE_SZ, static_cast<int>(bytes.size()));
  }
  if (capacity < 0 || static_cast<size_t>(capacity) < bytes.size()) {
    return fail(Status::invalid_argument("stdin bytes (" + std::to_string(bytes.size()) +
                                         ") do not fit a pipe's buffer"));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fds[1], bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Status::io_error("write to the stdin pipe: " + errno_text(errno)));
    done += static_cast<size_t>(n);
  }
  close_fd(fds[1]);
  return fds[0];
}

Status open_pipes(Pipes& p, const std::string& stdin_bytes) {
  if (::pipe2(p.out, O_CLOEXEC) != 0 || ::pipe2(p.err, O_CLOEXEC) != 0 ||
      ::pipe2(p.exec_err, O_CLOEXEC) != 0) {
    const int err = errno;
    p.close_all();
    return Status::io_error("pipe2: " + errno_text(err));
  }
  if (!stdin_bytes.empty()) {
    Result<int> in = stdin_pipe(stdin_bytes);
    if (!in.ok()) {
      p.close_all();
      return in.status();
    }
    p.dev_null = *in;
    return Status::ok_status();
  }
  p.dev_null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (p.dev_null < 0) {
    const int err = errno;
    p.close_all();
    return Status::io_error("open /dev/null: " + errno_text(err));
  }
  return Status::ok_status();
}

[[noreturn]] void child_fail(int fd, int err) {
  [[maybe_unused]] const ssize_t n = ::write(fd, &err, sizeof(err));
  ::_exit(127);
}

// Runs in the forked child: async-signal-safe calls only.
[[noreturn]] void exec_in_child(const Pipes& p, pid_t parent, int death_signal, long max_fd,
                                const char* path, char* const* argv, char* const* envp) {
  ::setpgid(0, 0);
  if (death_signal != 0) {
    if (::prctl(PR_SET_PDEATHSIG, death_signal) != 0) child_fail(p.exec_err[1], errno);
    if (::getppid() != parent) ::_exit(126);  // the supervisor died before prctl took effect
  }
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl = {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &dfl, nullptr);
  }
  if (::dup2(p.dev_null, STDIN_FILENO) < 0 || ::dup2(p.out[1], STDOUT_FILENO) < 0 ||
      ::dup2(p.err[1], STDERR_FILENO) < 0) {
    child_fail(p.exec_err[1], errno);
  }
  // Everything above stderr closes at exec; the exec-error pipe stays open until then.
  if (::syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
    for (long fd = 3; fd < max_fd; ++fd) ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  }
  ::execve(path, argv, envp);
  child_fail(p.exec_err[1], errno);
}

// Reads the exec-error pipe: 0 when exec succeeded (EOF), else the child's errno.
int read_exec_errno(int fd) {
  int child_errno = 0;
  for (;;) {
    const ssize_t n = ::read(fd, &child_errno, sizeof(child_errno));
    if (n < 0 && errno == EINTR) continue;
    return n == static_cast<ssize_t>(sizeof(child_errno)) ? child_errno : 0;
  }
}

}  // namespace

Result<LaunchedChild> launch_child(const LaunchSpec& spec) {
  if (spec.argv.empty()) return Status::invalid_argument("empty argv");
  KEEL_ASSIGN_OR_RETURN(std::string path, resolve_program(spec.argv[0]));
  std::vector<std::string> argv_strings = spec.argv;
  std::vector<std::string> env_strings = build_env(spec.env);
  std::vector<char*> argv = c_array(argv_strings);
  std::vector<char*> envp = c_array(env_strings);
  const long open_max = ::sysconf(_SC_OPEN_MAX);
  const long max_fd = open_max > 0 && open_max < 65536 ? open_max : 65536;

  Pipes p;
  KEEL_TRY(open_pipes(p, spec.stdin_bytes));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    p.close_all();
    return Status::io_error("fork: " + errno_text(err));
  }
  if (pid == 0) {
    exec_in_child(p, parent, spec.parent_death_signal, max_fd, path.c_str(), argv.data(),
                  envp.data());
  }
  close_fd(p.out[1]);
  close_fd(p.err[1]);
  close_fd(p.exec_err[1]);
  close_fd(p.dev_null);
  const int child_errno = read_exec_errno(p.exec_err[0]);
  close_fd(p.exec_err[0]);
  if (child_errno != 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    p.close_all();
    const std::string msg = "exec '" + path + "': " + errno_text(child_errno);
    return child_errno == ENOENT || child_errno == EACCES || child_errno == ENOEXEC
               ? Status::not_found(msg)
               : Status::io_error(msg);
  }
  LaunchedChild child;
  child.pid = pid;
  child.stdout_fd = p.out[0];
  child.stderr_fd = p.err[0];
  return child;
}

std::string self_exe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("keel") : p.string();
}

}  // namespace keel::proc
