// SharedBlockAllocator implementation (see shared_block_allocator.h). Every method takes mu_.
#include "kv/shared_block_allocator.h"

#include <string>

#include "core/check.h"

namespace keel::kv {

SharedBlockAllocator::SharedBlockAllocator(int32_t num_blocks)
    : num_blocks_(num_blocks), ref_(num_blocks, 0) {
  KEEL_CHECK(num_blocks >= 0);
  free_.reserve(num_blocks);
  for (BlockId b = num_blocks - 1; b >= 0; --b) free_.push_back(b);  // block 0 on top
}

void SharedBlockAllocator::check_id(BlockId b) const {
  KEEL_CHECK_MSG(b >= 0 && b < num_blocks(), "block id out of range");
}

int32_t SharedBlockAllocator::num_free() const {
  MutexLock lock(mu_);
  return static_cast<int32_t>(free_.size());
}

bool SharedBlockAllocator::allocate(int32_t n, std::vector<BlockId>* out) {
  KEEL_CHECK(n >= 0);
  MutexLock lock(mu_);
  if (static_cast<int32_t>(free_.size()) < n) return false;
  for (int32_t i = 0; i < n; ++i) {
    const BlockId b = free_.back();
    free_.pop_back();
    KEEL_CHECK_MSG(ref_[b] == 0, "allocated block on the free stack");
    ref_[b] = 1;
    out->push_back(b);
  }
  return true;
}

void SharedBlockAllocator::acquire(BlockId b) {
  check_id(b);
  MutexLock lock(mu_);
  KEEL_CHECK_MSG(ref_[b] > 0, "acquire of a free block");
  ++ref_[b];
}

void SharedBlockAllocator::release(std::span<const BlockId> blocks) {
  for (const BlockId b : blocks) check_id(b);
  MutexLock lock(mu_);
  for (const BlockId b : blocks) {
    KEEL_CHECK_MSG(ref_[b] > 0, "release of a free block");
    if (--ref_[b] == 0) free_.push_back(b);
  }
}

int32_t SharedBlockAllocator::ref_count(BlockId b) const {
  check_id(b);
  MutexLock lock(mu_);
  return ref_[b];
}

Status SharedBlockAllocator::check_invariants() const {
  MutexLock lock(mu_);
  const int32_t n = num_blocks();
  std::vector<uint8_t> on_stack(n, 0);
  for (const BlockId b : free_) {
    if (b < 0 || b >= n) return Status::internal("free stack holds bad id " + std::to_string(b));
    if (on_stack[b]) return Status::internal("block " + std::to_string(b) + " is free twice");
    on_stack[b] = 1;
  }
  for (BlockId b = 0; b < n; ++b) {
    if (ref_[b] < 0) return Status::internal("negative ref count on block " + std::to_string(b));
    if ((ref_[b] == 0) != (on_stack[b] == 1)) {
      return Status::internal("block " + std::to_string(b) + " has ref count " +
                              std::to_string(ref_[b]) + " but is " + (on_stack[b] ? "" : "not ") +
                              "free");
    }
  }
  return Status::ok_status();
}

}  // namespace keel::kv
