// SealedHolder (see sealed_holder.h).
#include "store/sealed_holder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace keel::store {
namespace {

constexpr int kAllSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL;

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

std::string holder_fd_path(pid_t pid, int fd) {
  return "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
}

SealedHolder::~SealedHolder() {
  MutexLock lock(mu_);
  for (const auto& [path, fd] : held_) {
    unlink_if_ours(path, fd);
    ::close(fd);
  }
  held_.clear();
}

Result<int> SealedHolder::create(const std::string& name) {
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return Status::io_error("model store: memfd_create(" + name + ") failed: " + errno_text(errno));
  }
  return fd;
}

void SealedHolder::drop(int fd) {
  if (fd >= 0) ::close(fd);
}

Status SealedHolder::seal_and_link(int fd, const std::string& link_path) {
  if (::fcntl(fd, F_ADD_SEALS, kAllSeals) != 0) {
    const int err = errno;
    ::close(fd);
    return Status::io_error("model store: sealing " + link_path + " failed: " + errno_text(err));
  }
  const std::filesystem::path final_path(link_path);
  const std::string tmp = (final_path.parent_path() / ("." + final_path.filename().string() +
                                                       ".link." + std::to_string(::getpid())))
                              .string();
  std::error_code ec;
  std::filesystem::remove(tmp, ec);
  if (::symlink(holder_fd_path(::getpid(), fd).c_str(), tmp.c_str()) != 0 ||
      ::rename(tmp.c_str(), link_path.c_str()) != 0) {
    const int err = errno;
    std::filesystem::remove(tmp, ec);
    ::close(fd);
    return Status::io_error("model store: linking " + link_path + " failed: " + errno_text(err));
  }
  MutexLock lock(mu_);
  if (auto it = held_.find(link_path); it != held_.end()) ::close(it->second);  // replaced
  held_[link_path] = fd;
  return {};
}

bool SealedHolder::release(const std::string& link_path) {
  MutexLock lock(mu_);
  const auto it = held_.find(link_path);
  if (it == held_.end()) return false;
  unlink_if_ours(link_path, it->second);
  ::close(it->second);
  held_.erase(it);
  return true;
}

bool SealedHolder::holds(const std::string& link_path) const {
  MutexLock lock(mu_);
  return held_.contains(link_path);
}

void SealedHolder::unlink_if_ours(const std::string& link_path, int fd) const {
  std::error_code ec;
  const std::filesystem::path target = std::filesystem::read_symlink(link_path, ec);
  if (!ec && target.string() == holder_fd_path(::getpid(), fd)) {
    std::filesystem::remove(link_path, ec);  // another preload may have replaced it: left alone
  }
}

}  // namespace keel::store
