// ChunkIndex: EPIC's index of compiled position-independent chunks — by the hash of a chunk's
// tokens (under the PIC root and the tenant's salt), the retained compile request whose KV table
// holds it. Bounded in KV blocks: an insert past the bound evicts the least recently used chunks
// (at least one entry stays). The index holds one reference on each entry's retained table; the
// caller (the engine's PIC part) takes it before insert() and releases the evicted ones.
//
// Thread safety: none (the engine thread's).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/types.h"
#include "kv/block_hash.h"

namespace keel::engine {

class ChunkIndex {
 public:
  // At most `max_blocks` KV blocks in all (the engine: a quarter of its pool).
  explicit ChunkIndex(int64_t max_blocks) : max_blocks_(max_blocks) {}

  // The compile request holding the chunk `hash`, marked as just used; nullopt when not indexed.
  std::optional<RequestKey> find(const kv::BlockHash& hash);
  [[nodiscard]] bool contains(const kv::BlockHash& hash) const;
  // Indexes `key`'s table of `blocks` blocks under `hash` (not indexed yet); returns the keys
  // evicted to stay within the bound, least recently used first.
  std::vector<RequestKey> insert(const kv::BlockHash& hash, RequestKey key, int64_t blocks);

  [[nodiscard]] size_t size() const { return entries_.size(); }
  [[nodiscard]] int64_t blocks() const { return blocks_; }

 private:
  struct Entry {
    RequestKey key = 0;
    int64_t blocks = 0;
    uint64_t used = 0;  // clock_ at the last use
  };
  int64_t max_blocks_;
  std::unordered_map<std::string, Entry> entries_;  // by block_hash_hex
  int64_t blocks_ = 0;
  uint64_t clock_ = 0;
};

}  // namespace keel::engine
