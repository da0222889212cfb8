// BlockPool: the ref-counted KV block ids of one pool, their eviction-ordered free list and the
// prefix index (block hash → block). Ids only; the KV bytes live in model::KvStorage.
// Invariants (check_invariants() verifies them): ref_count ≥ 0; on the free list ⇔ ref_count 0;
// num_free + used = total. take_free() pops the head; a released block with a hash goes to the
// tail (LRU eviction), one without to the head (reused first). One block per hash, one hash per
// block; taking a cached free block evicts its hash; a block with a hash is never written.
// Thread safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/cache_event_log.h"

namespace keel::kv {

// A cached block that take_free() evicted from the prefix index: its bytes are intact until the
// next forward pass writes into it (the caller may copy them to a lower tier first).
struct EvictedCachedBlock {
  BlockId block = 0;
  BlockHash hash;
};

class BlockPool {
 public:
  explicit BlockPool(int32_t num_blocks);  // all blocks free, in id order

  [[nodiscard]] int32_t num_blocks() const { return static_cast<int32_t>(ref_.size()); }
  [[nodiscard]] int32_t num_free() const { return num_free_; }
  [[nodiscard]] int32_t num_cached() const { return static_cast<int32_t>(index_.size()); }

  // Takes the head of the free list with ref_count 1, evicting its hash if it had one.
  // nullopt when no block is free.
  [[nodiscard]] std::optional<BlockId> take_free();
  // ref++; a free (cached) block leaves the free list.
  void acquire(BlockId b);
  // ref--; at 0 the block joins the free list (tail when it has a hash, head otherwise).
  void release(BlockId b);

  [[nodiscard]] int32_t ref_count(BlockId b) const;
  [[nodiscard]] bool is_free(BlockId b) const { return ref_count(b) == 0; }

  // The block registered under `h`, if any.
  [[nodiscard]] std::optional<BlockId> lookup(const BlockHash& h) const;
  // b's hash, or nullptr when b is not in the index.
  [[nodiscard]] const BlockHash* hash_of(BlockId b) const;
  // Registers referenced block b (without a hash) under h. False (no change) when h already
  // names a block.
  bool publish(BlockId b, const BlockHash& h);
  // Removes b from the index (no-op when it has no hash).
  void unpublish(BlockId b);
  // Forgets every hash; free blocks stay free, in their current order.
  void clear_index();

  // With `on`, take_free() logs every cached block it evicts until take_evictions() collects them.
  void set_record_evictions(bool on) { record_evictions_ = on; }
  // The evictions logged since the last call, oldest first.
  std::vector<EvictedCachedBlock> take_evictions();
  // With a log (borrowed; must outlive the pool or be reset to null), every key that leaves the
  // index — unpublish(), an eviction by take_free() — logs `removed`, and clear_index() `cleared`.
  void set_event_log(CacheEventLog* log) { event_log_ = log; }

  // The free list from head (next taken) to tail. For tests and debugging.
  [[nodiscard]] std::vector<BlockId> free_list() const;
  // Verifies the invariants above; Internal error naming the first violation.
  [[nodiscard]] Status check_invariants() const;

 private:
  void check_id(BlockId b) const;
  void link_head(BlockId b);
  void link_tail(BlockId b);
  void unlink(BlockId b);

  // Free list: intrusive doubly linked over block ids; index num_blocks() is the sentinel.
  std::vector<int32_t> prev_;
  std::vector<int32_t> next_;
  std::vector<int32_t> ref_;                      // [num_blocks] reference counts
  std::vector<std::optional<BlockHash>> hashes_;  // [num_blocks] hash when in the index
  std::unordered_map<BlockHash, BlockId, BlockHashHasher> index_;
  int32_t num_free_ = 0;
  bool record_evictions_ = false;
  std::vector<EvictedCachedBlock> evictions_;
  CacheEventLog* event_log_ = nullptr;
};

}  // namespace keel::kv
