// GgufFile: a parsed GGUF v2/v3 file — metadata, tensor infos and, depending on DataMode, the
// tensor bytes read into the process's own memory (default), memory-mapped, or not loaded.
//
// Validation is strict: a truncated file, bad magic, unknown version, out-of-range offsets or
// sizes, absurd counts, duplicate names, unknown tensor types or misaligned data give a Status
// naming the file and the problem. Nothing is read outside the file. Every count is checked
// against the bytes left in the file before anything is allocated, so parsing memory stays
// proportional to the file (and metadata values are capped by ReadOptions::max_metadata_values).
// Tensors may overlap or alias each other's bytes (llama.cpp accepts this too); each must lie
// wholly inside the data section, in every DataMode (kNone included).
//
// Thread safety: immutable after open() (but for mutable_tensor_data(), used by the owner before
// sharing the file); tensor_data() may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/buffer.h"
#include "core/dtype.h"
#include "core/file_system.h"
#include "core/result.h"
#include "gguf/byte_ranges.h"
#include "gguf/value.h"

namespace keel::gguf {

inline constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as little-endian uint32
inline constexpr uint64_t kDefaultAlignment = 32;
inline constexpr int kMaxDims = 4;
inline constexpr uint64_t kMaxAlignment = uint64_t{1} << 30;  // largest general.alignment accepted
inline constexpr int kMaxArrayDepth = 8;  // most levels of arrays within arrays accepted

struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // GGML order: shape[0] is the contiguous (innermost) dimension
  DType dtype = DType::kF32;
  uint64_t offset = 0;  // from the start of the data section; a multiple of the alignment
  int64_t num_elements = 0;
  uint64_t num_bytes = 0;
};

enum class DataMode {
  kRead,  // copy tensor data into an aligned anonymous buffer (the default for weights)
  kMmap,  // map the file read-only; tensor views point into the mapping (the file must not
          // shrink while mapped: reading a page past its new end raises SIGBUS)
  kNone,  // metadata and tensor infos only (vocab files, `keel info`)
};

struct ReadOptions {
  DataMode mode = DataMode::kRead;
  FileSystem* fs = nullptr;  // nullptr: a PosixFileSystem
  // Called while tensor data is read (kRead only) with bytes done and bytes total.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // Parts of the data section not to read (kRead only; ignored for kMmap and kNone): called
  // once, after the header is parsed and validated, with the file's tensor infos; returns byte
  // ranges as offsets from the data section's start (as TensorInfo::offset), in any order,
  // overlapping or empty ones allowed (they are merged). Every range must lie within the data
  // section, else open() fails with kInvalidArgument naming the range. The bytes of the ranges
  // are left as the fresh buffer holds them — zero, and for a buffer of 2 MiB or more untouched
  // pages of an anonymous mapping that never become resident — so tensor_data() of a skipped
  // tensor reads zeros; the caller must not use those bytes. `progress` then counts only the
  // bytes read. Empty function: the whole section is read.
  std::function<std::vector<ByteRange>(const std::vector<TensorInfo>&)> skip;
  // Most metadata values (array elements included) accepted before open() fails with
  // kOutOfRange; bounds parsing memory (~40 bytes per value) for hostile files. A 256k-token
  // vocabulary with merges holds about 1M values.
  uint64_t max_metadata_values = uint64_t{1} << 24;
};

class GgufFile {
 public:
  // Errors: kCorrupt (malformed or truncated file), kUnsupported (GGUF v1, unknown version or
  // tensor type), kOutOfRange (max_metadata_values exceeded), kIoError / kNotFound from the file
  // system, kResourceExhausted when memory runs out. Every message starts with the path.
  static Result<GgufFile> open(const std::string& path, const ReadOptions& options = {});

  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] uint32_t version() const { return version_; }
  [[nodiscard]] uint64_t alignment() const { return alignment_; }
  [[nodiscard]] uint64_t file_size() const { return file_size_; }
  [[nodiscard]] uint64_t data_offset() const { return data_offset_; }  // file offset of data

  [[nodiscard]] const std::vector<KeyValue>& metadata() const { return metadata_; }
  // The value for `key`, or nullptr.
  [[nodiscard]] const Value* find(std::string_view key) const;
  // Typed getters: NotFound when absent, InvalidArgument (naming key and type) when mistyped.
  [[nodiscard]] Result<int64_t> get_int(std::string_view key) const;
  [[nodiscard]] Result<double> get_float(std::string_view key) const;
  [[nodiscard]] Result<bool> get_bool(std::string_view key) const;
  [[nodiscard]] Result<std::string> get_string(std::string_view key) const;
  [[nodiscard]] Result<const Array*> get_array(std::string_view key) const;

  [[nodiscard]] const std::vector<TensorInfo>& tensors() const { return tensors_; }
  [[nodiscard]] const TensorInfo* find_tensor(std::string_view name) const;
  // The tensor's bytes; empty when opened with DataMode::kNone. `info` must come from tensors().
  [[nodiscard]] std::span<const std::byte> tensor_data(const TensorInfo& info) const;
  // The same bytes, writable: only with DataMode::kRead (the file's own copy), else empty. For the
  // owner's load-time rewriting of tensors (model weights into the row-group layout) before the
  // file is shared across threads; tensor_data() then returns the rewritten bytes.
  [[nodiscard]] std::span<std::byte> mutable_tensor_data(const TensorInfo& info);
  [[nodiscard]] bool has_data() const { return data_ != nullptr; }

 private:
  GgufFile() = default;
  friend class HeaderParser;

  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t file_size_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<KeyValue> metadata_;
  std::unordered_map<std::string, size_t> metadata_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
  AlignedBuffer owned_data_;               // DataMode::kRead
  std::unique_ptr<MappedRegion> mapping_;  // DataMode::kMmap
  const std::byte* data_ = nullptr;        // start of the data section, or null
};

}  // namespace keel::gguf
