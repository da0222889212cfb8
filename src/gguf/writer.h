// GgufWriter: builds a GGUF v3 (or v2) file from metadata and tensors. Used by tests (to make small
// and deliberately broken files) and by `keel make-model`. Tensor bytes may be supplied up front or
// produced at write time by a fill callback, so multi-gigabyte models never sit in memory whole.
// Layout: header, metadata in insertion order, tensor infos, padding to `general.alignment`
// (default 32), then each tensor's bytes padded to the alignment. Metadata is written as given
// (tests use this to make broken files: a bad version, a non-power-of-two alignment); only a
// `general.alignment` outside 1..kMaxAlignment is ignored for the layout, which then uses 32.
// Arrays whose elements do not all have the declared element type are rejected at write time.
//
// Thread safety: none; one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/file_system.h"
#include "core/result.h"
#include "gguf/value.h"

namespace keel::gguf {

class GgufWriter {
 public:
  // Fills exactly out.size() bytes of one tensor.
  using FillFn = std::function<Status(std::span<std::byte> out)>;
  // Called after each tensor with (tensors written, tensors total).
  using ProgressFn = std::function<void(size_t done, size_t total)>;

  explicit GgufWriter(uint32_t version = 3) : version_(version) {}

  // Sets a metadata value; a key set twice keeps its first position and the last value.
  void set(const std::string& key, Value value);
  // Adds a tensor (shape in GGML order, shape[0] contiguous). Fails on a duplicate name or a row
  // that is not a multiple of the type's block size.
  Status add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape, FillFn fill);
  Status add_tensor(const std::string& name, DType dtype, std::vector<int64_t> shape,
                    std::span<const std::byte> data);

  // The whole file in memory. InvalidArgument for an array holding an element of another type;
  // a fill callback's error is returned prefixed with the tensor name.
  [[nodiscard]] Result<std::vector<std::byte>> to_bytes() const;
  // Writes `path` atomically (a temporary file renamed into place).
  [[nodiscard]] Status write(const std::string& path, FileSystem* fs = nullptr,
                             const ProgressFn& progress = {}) const;
  // Appends the whole file to `file` (left open: the caller closes it).
  [[nodiscard]] Status write_to(WritableFile& file, const ProgressFn& progress = {}) const;

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t num_bytes;
    uint64_t offset;  // within the data section
    FillFn fill;
  };
  using Sink = std::function<Status(std::span<const std::byte>)>;
  [[nodiscard]] Status serialize(const Sink& sink, const ProgressFn& progress) const;
  [[nodiscard]] uint64_t alignment() const;

  uint32_t version_;
  std::vector<KeyValue> metadata_;
  std::vector<PendingTensor> tensors_;
  uint64_t data_size_ = 0;
};

}  // namespace keel::gguf
