// AlignedBuffer: small buffers from aligned operator new, large ones from mmap with a THP hint.
#include "core/buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <utility>

namespace keel {
namespace {
constexpr size_t kAlign = 64;
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

Result<AlignedBuffer> AlignedBuffer::allocate(size_t size) {
  AlignedBuffer buf;
  if (size == 0) return buf;
  if (size >= kHugePage) {
    // Over-allocate by one huge page so the start can be 2 MiB aligned.
    const size_t mapped = size + kHugePage;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      return Status::resource_exhausted("cannot allocate " + std::to_string(size) +
                                        " bytes: " + std::strerror(errno));
    }
    const auto addr = reinterpret_cast<uintptr_t>(p);
    const uintptr_t aligned = (addr + kHugePage - 1) & ~(kHugePage - 1);
    const size_t used = (size + 4095) & ~size_t{4095};
    // Return the unaligned head and the unused tail to the system.
    if (aligned > addr) munmap(p, aligned - addr);
    if (aligned + used < addr + mapped) {
      munmap(reinterpret_cast<void*>(aligned + used), addr + mapped - (aligned + used));
    }
    madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
    buf.data_ = reinterpret_cast<std::byte*>(aligned);
    buf.mapped_size_ = used;
  } else {
    void* p = ::operator new (size, std::align_val_t{kAlign}, std::nothrow);
    if (!p) return Status::resource_exhausted("cannot allocate " + std::to_string(size) + " bytes");
    std::memset(p, 0, size);
    buf.data_ = static_cast<std::byte*>(p);
  }
  buf.size_ = size;
  return buf;
}

void AlignedBuffer::split_huge_page_at(size_t at) {
  if (mapped_size_ == 0 || at % kHugePage == 0 || at >= size_) return;
  const size_t start = at / kHugePage * kHugePage;
  const size_t len = std::min(kHugePage, mapped_size_ - start);
  madvise(data_ + start, len, MADV_NOHUGEPAGE);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      mapped_size_(std::exchange(other.mapped_size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_size_ = std::exchange(other.mapped_size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { release(); }

void AlignedBuffer::release() {
  if (!data_) return;
  if (mapped_size_ > 0) {
    munmap(data_, mapped_size_);
  } else {
    ::operator delete (data_, std::align_val_t{kAlign});
  }
  data_ = nullptr;
  size_ = 0;
  mapped_size_ = 0;
}

}  // namespace keel
