// AlignedBuffer: an owned, zero-initialised, 64-byte aligned block of anonymous memory. Large
// buffers (≥ 2 MiB) are 2 MiB aligned and advised for transparent huge pages, which helps
// weight streaming. Move-only; the memory is released on destruction.
#pragma once

#include <cstddef>

#include "core/result.h"

namespace keel {

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  // Allocates `size` bytes; an error (not an abort) when the allocation fails.
  static Result<AlignedBuffer> allocate(size_t size);

  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  [[nodiscard]] std::byte* data() { return data_; }
  [[nodiscard]] const std::byte* data() const { return data_; }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  // For a buffer only partly written (a sharded load): the 2 MiB huge page holding byte `at` is
  // backed by 4 KiB pages instead (MADV_NOHUGEPAGE), so writing the bytes on one side of `at`
  // does not make the untouched other side resident. No-op for a small (heap) buffer or an `at`
  // on a huge-page boundary.
  void split_huge_page_at(size_t at);

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_size_ = 0;  // > 0 when the memory came from mmap
};

}  // namespace keel
