// SharedBlockAllocator: the KV block ids of one pool handed out to several threads at once — the
// one structure semi-PD's prefill and decode workers both touch (engine/semi_pd_engine.h). Ids
// and reference counts only; the bytes live in model::KvStorage, and a block's bytes belong to
// whoever holds its references. No prefix index (semi-PD runs without a prefix cache).
// Invariants (check_invariants() verifies them): ref_count ≥ 0; a block is on the free stack ⇔
// its ref_count is 0; num_free + num_allocated = num_blocks; no block is on the stack twice.
// Thread safety: every method may be called from any thread; one mutex guards all state, held
// only for O(n) pointer work (never across a forward pass). The colocated engine's BlockPool is
// untouched by this (its single-thread path keeps its cost).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/mutex.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::kv {

class SharedBlockAllocator {
 public:
  explicit SharedBlockAllocator(int32_t num_blocks);  // all free; handed out in id order
  SharedBlockAllocator(const SharedBlockAllocator&) = delete;
  SharedBlockAllocator& operator=(const SharedBlockAllocator&) = delete;

  [[nodiscard]] int32_t num_blocks() const { return num_blocks_; }
  [[nodiscard]] int32_t num_free() const;
  [[nodiscard]] int32_t num_allocated() const { return num_blocks() - num_free(); }

  // Appends n free blocks (ref_count 1 each) to *out, all or none: false (nothing taken) when
  // fewer than n are free.
  [[nodiscard]] bool allocate(int32_t n, std::vector<BlockId>* out);
  // ref++ of a held block (sharing it); the block must be allocated.
  void acquire(BlockId b);
  // ref-- of each block; at 0 it returns to the free stack (reused first).
  void release(std::span<const BlockId> blocks);

  [[nodiscard]] int32_t ref_count(BlockId b) const;
  // Verifies the invariants above; Internal error naming the first violation.
  [[nodiscard]] Status check_invariants() const;

 private:
  void check_id(BlockId b) const;

  const int32_t num_blocks_;  // ref_.size(), which never changes: read without the lock
  mutable Mutex mu_;
  std::vector<int32_t> ref_ KEEL_GUARDED_BY(mu_);   // [num_blocks] reference counts
  std::vector<BlockId> free_ KEEL_GUARDED_BY(mu_);  // stack of free ids, top = back()
};

}  // namespace keel::kv
