// Tenants' quota windows in a directory the gateways share (see quota_dir.h).
#include "server/quota_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "core/log.h"

namespace keel::server {
namespace {

Status errno_error(const std::string& what, const std::string& path, int err) {
  return Status::io_error(fmt::format("quota dir: {} {}: {}", what, path, std::strerror(err)));
}

std::string random_owner() {
  std::random_device rd;
  return fmt::format("{:08x}{:08x}-{}", rd(), rd(), ::getpid());
}

// A descriptor closed on every path out.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

// flock(`op`) on `fd`, retried without blocking until kQuotaLockWaitMs have passed.
Status lock_within_deadline(int fd, const std::string& path) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kQuotaLockWaitMs);
  auto pause = std::chrono::microseconds(50);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return errno_error("cannot lock", path, errno);
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::io_error(
          fmt::format("quota dir: {} still locked after {} ms", path, kQuotaLockWaitMs));
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(2000));
  }
  return Status::ok_status();
}

Result<std::string> read_all(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::string();
    return errno_error("cannot open", path, errno);
  }
  Fd guard(fd);
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("cannot read", path, errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

// Replaces `path` whole with `text` by a temporary file renamed over it (no fsync: a window lost
// with the machine costs at most one minute's accounting).
Status write_all(const std::string& path, const std::string& tmp, const std::string& text) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot create", tmp, errno);
  {
    Fd guard(fd);
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error("cannot write", tmp, errno);
      done += static_cast<size_t>(n);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) return errno_error("cannot rename", tmp, errno);
  return Status::ok_status();
}

}  // namespace

Result<std::unique_ptr<QuotaDir>> QuotaDir::open(std::string dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir + "/owners", ec);
  if (ec) {
    return Status::io_error(
        fmt::format("quota dir: cannot create {}/owners: {}", dir, ec.message()));
  }
  const std::string owner = random_owner();
  const std::string path = dir + "/owners/" + owner + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot create", path, errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_error("cannot lock", path, err);
  }
  return std::unique_ptr<QuotaDir>(new QuotaDir(std::move(dir), owner, fd));
}

QuotaDir::~QuotaDir() {
  ::unlink((dir_ + "/owners/" + owner_ + ".lock").c_str());
  ::close(owner_fd_);
}

bool QuotaDir::owner_alive(const std::string& owner) const {
  if (owner.find('/') != std::string::npos || owner.starts_with('.')) return false;
  const std::string path = dir_ + "/owners/" + owner + ".lock";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno != ENOENT;  // unreadable for another reason: assume alive
  Fd guard(fd);
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::unlink(path.c_str());  // its holder is gone
    return false;
  }
  return true;  // EWOULDBLOCK: its holder lives (any other error: assume so too)
}

template <typename Fn>
Status QuotaDir::with_record(const std::string& tenant, Fn fn) {
  const std::string base = dir_ + "/" + tenant;
  const std::string lock_path = base + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error("cannot open", lock_path, errno);
  Fd guard(fd);  // closing it releases the lock
  KEEL_TRY(lock_within_deadline(fd, lock_path));
  const std::string path = base + ".quota";
  KEEL_ASSIGN_OR_RETURN(std::string text, read_all(path));
  Result<QuotaRecord> decoded = decode_quota_record(text);
  QuotaRecord record;
  if (decoded.ok()) {
    record = std::move(*decoded);
  } else {
    // A record this keel cannot read is started afresh (at most one minute's accounting lost)
    // rather than refusing the tenant's every request.
    KEEL_LOG_WARN("{} ({}): started afresh", decoded.status().to_string(), path);
  }
  if (!fn(&record)) return Status::ok_status();
  return write_all(path, base + ".quota.tmp." + owner_, encode_quota_record(record));
}

Result<QuotaDir::Admission> QuotaDir::admit(const std::string& tenant, const TenantLimits& limits,
                                            int64_t now_ms, int64_t tokens) {
  Admission a;
  const Status s = with_record(tenant, [&](QuotaRecord* r) {
    std::vector<std::string> gone;
    for (const auto& [owner, n] : r->in_flight) {
      if (owner != owner_ && !owner_alive(owner)) gone.push_back(owner);
    }
    for (const std::string& owner : gone) a.dropped_owners += record_drop_owner(r, owner) ? 1 : 0;
    a.quota = record_admit(r, owner_, limits, now_ms, tokens);
    a.view = record_view(*r, limits, now_ms);
    return true;  // expired entries are dropped even when refused
  });
  if (!s.ok()) return s;
  return a;
}

Status QuotaDir::settle(const std::string& tenant, uint64_t entry_id, int64_t tokens) {
  return with_record(tenant, [&](QuotaRecord* r) {
    record_settle(r, owner_, entry_id, tokens);
    return true;
  });
}

Result<RateLimitView> QuotaDir::view(const std::string& tenant, const TenantLimits& limits,
                                     int64_t now_ms) {
  RateLimitView v;
  const Status s = with_record(tenant, [&](QuotaRecord* r) {
    v = record_view(*r, limits, now_ms);
    return false;
  });
  if (!s.ok()) return s;
  return v;
}

}  // namespace keel::server
