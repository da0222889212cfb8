// PosixFileSystem: open/pread/mmap/write with errors turned into Statuses naming the path.
#include "core/file_system.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace keel {
namespace {

Status errno_status(const std::string& what, const std::string& path, int err) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) return Status::not_found(msg);
  return Status::io_error(msg);
}

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }

  const std::string& path() const override { return path_; }
  uint64_t size() const override { return size_; }

  Status read_at(uint64_t offset, size_t n, void* dst) const override {
    if (offset > size_ || n > size_ - offset) {
      return Status::corrupt(path_ + ": read of " + std::to_string(n) + " bytes at offset " +
                             std::to_string(offset) + " runs past the end of the file (" +
                             std::to_string(size_) + " bytes)");
    }
    auto* out = static_cast<char*>(dst);
    while (n > 0) {
      const size_t chunk = n < (size_t{1} << 30) ? n : (size_t{1} << 30);
      ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        return errno_status("read failed", path_, errno);
      }
      if (got == 0) return Status::io_error(path_ + ": unexpected end of file");
      out += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<size_t>(got);
    }
    return {};
  }

  Result<std::unique_ptr<MappedRegion>> map() const override {
    if (size_ == 0) return Status::corrupt(path_ + ": cannot map an empty file");
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) return errno_status("mmap failed", path_, errno);
    return std::make_unique<MappedRegion>(static_cast<const std::byte*>(p), size_);
  }

 private:
  std::string path_;
  int fd_;
  uint64_t size_;
};

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }

  Status append(std::span<const std::byte> data) override {
    if (fd_ < 0) return Status::internal(path_ + ": append after close");
    const auto* p = reinterpret_cast<const char*>(data.data());
    size_t n = data.size();
    while (n > 0) {
      ssize_t put = ::write(fd_, p, n);
      if (put < 0) {
        if (errno == EINTR) continue;
        return errno_status("write failed", path_, errno);
      }
      p += put;
      n -= static_cast<size_t>(put);
    }
    return {};
  }

  Status sync() override {
    if (fd_ < 0) return Status::internal(path_ + ": sync after close");
    if (::fsync(fd_) != 0) return errno_status("fsync failed", path_, errno);
    return {};
  }

  Status close() override {
    if (fd_ < 0) return {};
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return errno_status("close failed", path_, errno);
    return {};
  }

 private:
  std::string path_;
  int fd_;
};

// flock() on a descriptor of its own: released when it is closed (or the process dies).
class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }

 private:
  int fd_;
};

}  // namespace

MappedRegion::~MappedRegion() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

Result<std::unique_ptr<RandomAccessFile>> PosixFileSystem::open_readable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return errno_status("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(path + ": not a regular file");
  }
  return std::unique_ptr<RandomAccessFile>(
      new PosixRandomAccessFile(path, fd, static_cast<uint64_t>(st.st_size)));
}

Result<std::unique_ptr<WritableFile>> PosixFileSystem::open_writable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot create", path, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

Result<std::unique_ptr<WritableFile>> PosixFileSystem::open_appendable(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot open for appending", path, errno);
  return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
}

bool PosixFileSystem::exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Status PosixFileSystem::create_directories(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return Status::io_error(path + ": cannot create directory: " + ec.message());
  return {};
}

Status PosixFileSystem::rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    return errno_status("cannot rename to " + to, from, errno);
  return {};
}

Status PosixFileSystem::remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return errno_status("cannot remove", path, errno);
  return {};
}

Result<std::vector<std::string>> PosixFileSystem::list_directory(const std::string& dir) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec == std::errc::no_such_file_or_directory)
    return Status::not_found(dir + ": no such directory");
  if (ec) return Status::io_error(dir + ": cannot list directory: " + ec.message());
  std::vector<std::string> names;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return Status::io_error(dir + ": cannot list directory: " + ec.message());
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) names.push_back(it->path().filename().string());
  }
  return names;
}

Status PosixFileSystem::sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status("cannot open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return errno_status("fsync of the directory failed", dir, err);
  return {};
}

Result<std::unique_ptr<FileLock>> PosixFileSystem::lock_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status("cannot open lock file", path, errno);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) return Status::failed_precondition(path + ": locked by another holder");
    return errno_status("cannot lock", path, err);
  }
  return std::unique_ptr<FileLock>(new PosixFileLock(fd));
}

}  // namespace keel
