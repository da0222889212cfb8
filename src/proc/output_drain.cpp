// OutputDrain (output_drain.h): one poll() loop over a child's stdout, stderr and a wake-up
// eventfd; line splitting; the ready line hand-off to the spawning thread.
#include "proc/output_drain.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "core/check.h"
#include "proc/ready_line.h"

namespace keel::proc {

namespace {
constexpr size_t kMaxLineBytes = 64 * 1024;
constexpr size_t kFinalDrainBytes = 1024 * 1024;
constexpr size_t kReadChunk = 16 * 1024;

void set_nonblocking(int fd) {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}
}  // namespace

OutputDrain::OutputDrain(int stdout_fd, int stderr_fd, LineSink sink) : sink_(std::move(sink)) {
  out_.fd = stdout_fd;
  out_.is_stdout = true;
  err_.fd = stderr_fd;
  set_nonblocking(out_.fd);
  set_nonblocking(err_.fd);
  wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  KEEL_CHECK_MSG(wake_fd_ >= 0, "eventfd failed");
  thread_ = std::thread([this] { run(); });
}

OutputDrain::~OutputDrain() { finish(); }

std::optional<std::string> OutputDrain::wait_ready_line(
    std::chrono::steady_clock::time_point deadline) {
  UniqueLock lock(mu_);
  ready_cv_.wait_until(lock.native(), deadline, [this] {
    mu_.assert_held();  // a wait's predicate runs under its lock
    return ready_line_.has_value();
  });
  return ready_line_;
}

void OutputDrain::finish() {
  if (finished_) return;
  finished_ = true;
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close_stream(out_);
  close_stream(err_);
  ::close(wake_fd_);
  wake_fd_ = -1;
}

void OutputDrain::run() {
  for (;;) {
    if (out_.fd < 0 && err_.fd < 0) return;  // both pipes at EOF: nothing left to read
    pollfd fds[3] = {{out_.fd, POLLIN, 0}, {err_.fd, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    const int rc = ::poll(fds, 3, -1);
    if (rc < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[2].revents != 0) break;
    if (fds[0].revents != 0) read_some(out_);
    if (fds[1].revents != 0) read_some(err_);
  }
  drain_remaining();
}

OutputDrain::ReadOutcome OutputDrain::read_some(Stream& s) {
  if (s.fd < 0) return ReadOutcome::kClosed;
  char buf[kReadChunk];
  const ssize_t n = ::read(s.fd, buf, sizeof(buf));
  if (n > 0) {
    s.partial.append(buf, static_cast<size_t>(n));
    emit_lines(s, /*flush_partial=*/false);
    return ReadOutcome::kData;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return ReadOutcome::kEmpty;
  close_stream(s);
  emit_lines(s, /*flush_partial=*/true);
  return ReadOutcome::kClosed;
}

void OutputDrain::drain_remaining() {
  for (Stream* s : {&out_, &err_}) {
    size_t budget = kFinalDrainBytes;
    while (budget > 0 && read_some(*s) == ReadOutcome::kData)
      budget -= std::min(budget, kReadChunk);
    emit_lines(*s, /*flush_partial=*/true);
  }
}

void OutputDrain::emit_lines(Stream& s, bool flush_partial) {
  size_t start = 0;
  for (;;) {
    const size_t nl = s.partial.find('\n', start);
    if (nl == std::string::npos) break;
    emit(s, std::string_view(s.partial).substr(start, nl - start));
    start = nl + 1;
  }
  s.partial.erase(0, start);
  while (s.partial.size() >= kMaxLineBytes) {
    emit(s, std::string_view(s.partial).substr(0, kMaxLineBytes));
    s.partial.erase(0, kMaxLineBytes);
  }
  if (flush_partial && !s.partial.empty()) {
    emit(s, s.partial);
    s.partial.clear();
  }
}

void OutputDrain::emit(const Stream& s, std::string_view line) {
  if (line.ends_with('\r')) line.remove_suffix(1);
  if (s.is_stdout && is_ready_line(line)) {
    MutexLock lock(mu_);
    if (!ready_line_) {
      ready_line_ = std::string(line);
      ready_cv_.notify_all();
    }
  }
  if (sink_) sink_(line);
}

void OutputDrain::close_stream(Stream& s) {
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
}

}  // namespace keel::proc
