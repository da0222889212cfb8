// CacheEventLog: what the prefix cache did to its index, in order — a full block published
// (stored, with its parent key and tokens), a cached key dropped (removed: evicted by take_free(),
// or un-published before a rewrite), every key forgotten (cleared). The engine drains it once per
// step and hands the events to whoever mirrors the cache (cluster/kv_events/kv_event_convert.h
// turns them into vLLM's KV events). Only index changes are logged: a block that stays private (its
// key already names another block) logs nothing, so stored/removed pair up per key. Thread safety:
// none; owned by the KvCacheManager, engine thread only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "kv/block_hash.h"

namespace keel::kv {

enum class CacheEventKind { kStored, kRemoved, kCleared };

// Which cache the event is about: the pool's prefix index (this log), or a tier below it
// (KvTiers logs those: a block gained or dropped by the host tier T1 or the disk tier T2).
enum class CacheMedium : uint8_t { kPool, kHost, kDisk };

struct CacheEvent {
  CacheEventKind kind = CacheEventKind::kStored;
  BlockHash hash;               // kStored, kRemoved: the block's key
  BlockHash parent;             // kStored: the key of the block before (kRootHash: the first)
  std::vector<int32_t> tokens;  // kStored: the block's tokens (block_size of them; a tier's
                                // events carry none, and kRootHash as parent: tiers keep payloads)
  CacheMedium medium = CacheMedium::kPool;
  friend bool operator==(const CacheEvent&, const CacheEvent&) = default;
};

class CacheEventLog {
 public:
  void stored(const BlockHash& hash, const BlockHash& parent, std::vector<int32_t> tokens) {
    events_.push_back({CacheEventKind::kStored, hash, parent, std::move(tokens)});
  }
  void removed(const BlockHash& hash) {
    events_.push_back({CacheEventKind::kRemoved, hash, {}, {}});
  }
  void cleared() { events_.push_back({CacheEventKind::kCleared, {}, {}, {}}); }
  // The events logged since the last call, oldest first.
  std::vector<CacheEvent> take() {
    std::vector<CacheEvent> out;
    out.swap(events_);
    return out;
  }
  [[nodiscard]] bool empty() const { return events_.empty(); }

 private:
  std::vector<CacheEvent> events_;
};

}  // namespace keel::kv
