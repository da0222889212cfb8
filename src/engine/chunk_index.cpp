// ChunkIndex (chunk_index.h).
#include "engine/chunk_index.h"

#include "core/check.h"
#include "kv/block_file.h"

namespace keel::engine {

std::optional<RequestKey> ChunkIndex::find(const kv::BlockHash& hash) {
  const auto it = entries_.find(kv::block_hash_hex(hash));
  if (it == entries_.end()) return std::nullopt;
  it->second.used = ++clock_;
  return it->second.key;
}

bool ChunkIndex::contains(const kv::BlockHash& hash) const {
  return entries_.contains(kv::block_hash_hex(hash));
}

std::vector<RequestKey> ChunkIndex::insert(const kv::BlockHash& hash, RequestKey key,
                                           int64_t blocks) {
  const auto [at, added] = entries_.emplace(kv::block_hash_hex(hash), Entry{key, blocks, ++clock_});
  KEEL_CHECK_MSG(added, "ChunkIndex::insert of a chunk already indexed");
  blocks_ += blocks;
  std::vector<RequestKey> evicted;
  while (blocks_ > max_blocks_ && entries_.size() > 1) {
    auto lru = entries_.begin();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->second.used < lru->second.used) lru = it;
    }
    blocks_ -= lru->second.blocks;
    evicted.push_back(lru->second.key);
    entries_.erase(lru);
  }
  return evicted;
}

}  // namespace keel::engine
