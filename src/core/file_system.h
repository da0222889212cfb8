// FileSystem: the only way keel code touches files, so tests can inject faults (short reads,
// I/O errors) and so a later remote or in-memory store fits the same interface.
// PosixFileSystem is the real one; it is stateless, so callers may construct it where needed.
//
// Thread safety: RandomAccessFile::read_at may be called concurrently; a WritableFile has one
// owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace keel {

// A read-only memory mapping of a whole file; unmapped on destruction.
class MappedRegion {
 public:
  MappedRegion(const std::byte* data, size_t size) : data_(data), size_(size) {}
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  ~MappedRegion();
  [[nodiscard]] const std::byte* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }

 private:
  const std::byte* data_;
  size_t size_;
};

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  [[nodiscard]] virtual const std::string& path() const = 0;
  [[nodiscard]] virtual uint64_t size() const = 0;
  // Reads exactly n bytes at `offset` into dst. A short read is an error naming the file.
  virtual Status read_at(uint64_t offset, size_t n, void* dst) const = 0;
  // Maps the whole file read-only.
  virtual Result<std::unique_ptr<MappedRegion>> map() const = 0;
};

class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual Status append(std::span<const std::byte> data) = 0;
  // Makes what was appended durable (fsync) before it returns. File systems without a disk
  // (in-memory test ones) need not implement it.
  virtual Status sync() { return {}; }
  // Flushes and closes; the file is complete only after close() returns ok.
  virtual Status close() = 0;
};

// An exclusive lock on a file, held until this object is destroyed (or the process dies).
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  virtual Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) = 0;
  // Creates or truncates `path`.
  virtual Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) = 0;
  // Opens `path` for appending, creating it if missing (a resumed download). Unsupported unless
  // the file system implements it.
  virtual Result<std::unique_ptr<WritableFile>> open_appendable(const std::string& path) {
    return Status::unsupported(path + ": this file system cannot append");
  }
  virtual bool exists(const std::string& path) = 0;
  virtual Status create_directories(const std::string& path) = 0;
  // Atomically replaces `to` with `from` (same file system).
  virtual Status rename(const std::string& from, const std::string& to) = 0;
  virtual Status remove(const std::string& path) = 0;
  // The names (not paths) of the regular files directly in `dir`, in no particular order.
  // NotFound when `dir` does not exist.
  virtual Result<std::vector<std::string>> list_directory(const std::string& dir) = 0;
  // Makes the directory's entries (files created, renamed or removed in it) durable (fsync of
  // the directory). File systems without a disk need not implement it.
  virtual Status sync_directory(const std::string& /*dir*/) { return {}; }
  // Takes an exclusive lock on `path` (created if missing) without waiting: FailedPrecondition
  // when another holder has it — another process, or another lock_file() of this one.
  virtual Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) {
    return Status::unsupported(path + ": this file system cannot lock files");
  }
};

class PosixFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_appendable(const std::string& path) override;
  bool exists(const std::string& path) override;
  Status create_directories(const std::string& path) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status remove(const std::string& path) override;
  Result<std::vector<std::string>> list_directory(const std::string& dir) override;
  Status sync_directory(const std::string& dir) override;
  Result<std::unique_ptr<FileLock>> lock_file(const std::string& path) override;
};

}  // namespace keel
