// Test-only MemoryFileSystem and FaultFileSystem (see test_file_systems.h).
#include "test_file_systems.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

namespace keel::gguf::test_util {
namespace {

// An anonymous read-only mapping holding a copy of `n` bytes at `src`.
Result<std::unique_ptr<MappedRegion>> map_copy(const std::string& path, const std::byte* src,
                                               size_t n) {
  if (n == 0) return Status::corrupt(path + ": cannot map an empty file");
  void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::io_error(path + ": anonymous mmap failed");
  std::memcpy(p, src, n);
  ::mprotect(p, n, PROT_READ);
  return std::make_unique<MappedRegion>(static_cast<const std::byte*>(p), n);
}

class MemoryFile final : public RandomAccessFile {
 public:
  MemoryFile(std::string path, std::shared_ptr<const std::vector<std::byte>> bytes)
      : path_(std::move(path)), bytes_(std::move(bytes)) {}
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_->size(); }
  Status read_at(uint64_t offset, size_t n, void* dst) const override {
    if (offset > size() || n > size() - offset) {
      return Status::corrupt(path_ + ": read of " + std::to_string(n) + " bytes at offset " +
                             std::to_string(offset) + " runs past the end of the file");
    }
    if (n > 0) std::memcpy(dst, bytes_->data() + offset, n);
    return {};
  }
  Result<std::unique_ptr<MappedRegion>> map() const override {
    return map_copy(path_, bytes_->data(), bytes_->size());
  }

 private:
  std::string path_;
  std::shared_ptr<const std::vector<std::byte>> bytes_;
};

class MemoryWritableFile final : public WritableFile {
 public:
  MemoryWritableFile(MemoryFileSystem* fs, std::string path) : fs_(fs), path_(std::move(path)) {}
  Status append(std::span<const std::byte> data) override {
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    return {};
  }
  Status close() override {
    fs_->put(path_, std::move(bytes_));
    return {};
  }

 private:
  MemoryFileSystem* fs_;
  std::string path_;
  std::vector<std::byte> bytes_;
};

}  // namespace

void MemoryFileSystem::put(const std::string& path, std::vector<std::byte> bytes) {
  files_[path] = std::make_shared<std::vector<std::byte>>(std::move(bytes));
}

const std::vector<std::byte>* MemoryFileSystem::get(const std::string& path) const {
  auto it = files_.find(path);
  return it == files_.end() ? nullptr : it->second.get();
}

Result<std::unique_ptr<RandomAccessFile>> MemoryFileSystem::open_readable(const std::string& path) {
  auto it = files_.find(path);
  if (it == files_.end()) return Status::not_found(path + ": no such file (memory)");
  return std::unique_ptr<RandomAccessFile>(new MemoryFile(path, it->second));
}

Result<std::unique_ptr<WritableFile>> MemoryFileSystem::open_writable(const std::string& path) {
  return std::unique_ptr<WritableFile>(new MemoryWritableFile(this, path));
}

bool MemoryFileSystem::exists(const std::string& path) { return files_.count(path) > 0; }

Status MemoryFileSystem::create_directories(const std::string&) { return {}; }

Status MemoryFileSystem::rename(const std::string& from, const std::string& to) {
  auto it = files_.find(from);
  if (it == files_.end()) return Status::not_found(from + ": no such file (memory)");
  files_[to] = it->second;
  files_.erase(from);
  return {};
}

Status MemoryFileSystem::remove(const std::string& path) {
  if (files_.erase(path) == 0) return Status::not_found(path + ": no such file (memory)");
  return {};
}

Result<std::vector<std::string>> MemoryFileSystem::list_directory(const std::string& dir) {
  const std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
  std::vector<std::string> names;
  for (const auto& [path, bytes] : files_) {
    if (path.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = path.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) names.push_back(rest);
  }
  return names;
}

class FaultRandomAccessFile final : public RandomAccessFile {
 public:
  FaultRandomAccessFile(FaultFileSystem* fs, std::unique_ptr<RandomAccessFile> base)
      : fs_(fs), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }
  uint64_t size() const override { return base_->size(); }

  Status read_at(uint64_t offset, size_t n, void* dst) const override {
    const uint64_t limit = fs_->plan_.fail_reads_after;
    const uint64_t done = fs_->bytes_read_.load();
    if (n > limit - std::min(limit, done)) {
      const size_t allowed = static_cast<size_t>(limit - std::min(limit, done));
      if (allowed > 0) KEEL_TRY(base_->read_at(offset, allowed, dst));
      fs_->bytes_read_ += allowed;
      return Status::io_error(path() + ": injected I/O error after " + std::to_string(limit) +
                              " bytes read");
    }
    KEEL_TRY(base_->read_at(offset, n, dst));
    fs_->bytes_read_ += n;
    return {};
  }

  Result<std::unique_ptr<MappedRegion>> map() const override {
    if (fs_->plan_.fail_map) return Status::io_error(path() + ": injected mmap failure");
    KEEL_ASSIGN_OR_RETURN(std::unique_ptr<MappedRegion> region, base_->map());
    if (!fs_->plan_.short_map) return region;
    return map_copy(path(), region->data(), std::max<size_t>(1, region->size() / 2));
  }

 private:
  FaultFileSystem* fs_;
  std::unique_ptr<RandomAccessFile> base_;
};

class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultFileSystem* fs, std::string path, std::unique_ptr<WritableFile> base)
      : fs_(fs), path_(std::move(path)), base_(std::move(base)) {}
  Status append(std::span<const std::byte> data) override {
    const uint64_t limit = fs_->plan_.fail_writes_after;
    if (data.size() > limit - std::min(limit, fs_->bytes_written_)) {
      return Status::io_error(path_ + ": injected write error after " + std::to_string(limit) +
                              " bytes written");
    }
    fs_->bytes_written_ += data.size();
    return base_->append(data);
  }
  Status close() override {
    Status s = base_->close();
    if (fs_->plan_.fail_close) return Status::io_error(path_ + ": injected close failure");
    return s;
  }

 private:
  FaultFileSystem* fs_;
  std::string path_;
  std::unique_ptr<WritableFile> base_;
};

Result<std::unique_ptr<RandomAccessFile>> FaultFileSystem::open_readable(const std::string& path) {
  if (plan_.fail_open) return Status::io_error(path + ": injected open failure");
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> base, base_->open_readable(path));
  return std::unique_ptr<RandomAccessFile>(new FaultRandomAccessFile(this, std::move(base)));
}

Result<std::unique_ptr<WritableFile>> FaultFileSystem::open_writable(const std::string& path) {
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> base, base_->open_writable(path));
  return std::unique_ptr<WritableFile>(new FaultWritableFile(this, path, std::move(base)));
}

}  // namespace keel::gguf::test_util
