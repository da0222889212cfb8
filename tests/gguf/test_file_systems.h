// Test-only FileSystems: MemoryFileSystem keeps files in memory (fast sweeps over thousands of
// mutated files; map() copies into an anonymous mapping so MappedRegion can unmap it), and
// FaultFileSystem wraps another FileSystem and injects the faults of a FaultPlan: failed opens,
// reads that fail after N bytes, failed or short mappings, failed writes and closes. Injected
// errors are kIoError and name the file, as the FileSystem contract requires.
//
// Thread safety: read_at may be called concurrently (the byte counter is atomic); the rest has
// one owner.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/file_system.h"

namespace keel::gguf::test_util {

class MemoryFileSystem final : public FileSystem {
 public:
  void put(const std::string& path, std::vector<std::byte> bytes);
  // The bytes of `path`, or nullptr.
  [[nodiscard]] const std::vector<std::byte>* get(const std::string& path) const;

  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override;
  bool exists(const std::string& path) override;
  Status create_directories(const std::string& path) override;
  Status rename(const std::string& from, const std::string& to) override;
  Status remove(const std::string& path) override;
  Result<std::vector<std::string>> list_directory(const std::string& dir) override;

 private:
  std::map<std::string, std::shared_ptr<std::vector<std::byte>>> files_;
};

struct FaultPlan {
  bool fail_open = false;  // open_readable fails
  // read_at fails once more than this many bytes would have been read in total (the bytes up to
  // the limit are still delivered).
  uint64_t fail_reads_after = std::numeric_limits<uint64_t>::max();
  bool fail_map = false;   // map() fails
  bool short_map = false;  // map() returns a region half the file's size
  // append() fails once more than this many bytes would have been written in total.
  uint64_t fail_writes_after = std::numeric_limits<uint64_t>::max();
  bool fail_close = false;  // WritableFile::close() fails
};

class FaultFileSystem final : public FileSystem {
 public:
  // `base` must outlive this object and every file it opens.
  FaultFileSystem(FileSystem* base, FaultPlan plan) : base_(base), plan_(plan) {}

  // Bytes delivered by read_at so far (all files).
  [[nodiscard]] uint64_t bytes_read() const { return bytes_read_.load(); }

  Result<std::unique_ptr<RandomAccessFile>> open_readable(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> open_writable(const std::string& path) override;
  bool exists(const std::string& path) override { return base_->exists(path); }
  Status create_directories(const std::string& path) override {
    return base_->create_directories(path);
  }
  Status rename(const std::string& from, const std::string& to) override {
    return base_->rename(from, to);
  }
  Status remove(const std::string& path) override { return base_->remove(path); }
  Result<std::vector<std::string>> list_directory(const std::string& dir) override {
    return base_->list_directory(dir);
  }

 private:
  friend class FaultRandomAccessFile;
  friend class FaultWritableFile;
  FileSystem* base_;
  FaultPlan plan_;
  std::atomic<uint64_t> bytes_read_{0};
  uint64_t bytes_written_ = 0;
};

}  // namespace keel::gguf::test_util
