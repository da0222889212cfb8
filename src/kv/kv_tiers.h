// KvTiers: the tiers below the engine pool as one unit — T1 (host DRAM) and T2 (disk), either
// optional. demote() stores an evicted pool block in T1 and writes it through to T2 (so the disk
// copy survives a restart); T1's own evictions move down to T2, and T2 drops its LRU blocks.
// fetch() looks in T1, then T2. A damaged T2 copy is dropped and reported as a miss, so the
// caller recomputes.
//
// Cache events (when recording, for the cluster's KV events): a block newly held by T1 or T2 is
// logged stored at that medium; one T1 evicts, or T2 drops as corrupt, is logged removed. T2's
// own LRU evictions are not (the disk tier drops them unreported), so a router's index may keep
// a stale "disk" entry for a block T2 evicted: it costs a less exact locality score or a shorter
// peer fetch, never wrong output.
// The engine drains them with its own per step (take_events).
//
// Thread safety: as TierStore (each tier locks internally); the event log has its own lock.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "core/mutex.h"
#include "kv/cache_event_log.h"

#include "kv/tier_store.h"

namespace keel::kv {

class KvTiers {
 public:
  // Either may be null; with both null the tiers hold nothing.
  KvTiers(std::unique_ptr<TierStore> host, std::unique_ptr<TierStore> disk);

  [[nodiscard]] bool empty() const { return host_ == nullptr && disk_ == nullptr; }
  // Copies `payload` into T1 and T2 (see above). A tier that refuses it (a block larger than
  // its capacity, a disk error) simply does not hold it: not the caller's concern.
  void demote(const BlockHash& key, std::span<const std::byte> payload);
  [[nodiscard]] bool contains(const BlockHash& key) const;
  // Copies key's payload into `out` from the highest tier holding a valid copy. False when no tier
  // has one (including a copy found corrupt, which is dropped).
  bool fetch(const BlockHash& key, std::span<std::byte> out);

  // The tier holding key's copy (host first), or kNone.
  [[nodiscard]] TierKind where(const BlockHash& key) const;
  // Measures each present tier's read cost (TierStore::measure_read()); a tier that fails to
  // measure keeps the default cost (free), and the error is returned for the log.
  Status measure();
  [[nodiscard]] const TierCost& host_cost() const { return host_cost_; }
  [[nodiscard]] const TierCost& disk_cost() const { return disk_cost_; }

  // Starts (or stops) logging cache events; take_events() drains them in order.
  void set_record_events(bool on);
  [[nodiscard]] std::vector<CacheEvent> take_events();

  [[nodiscard]] const TierStore* host() const { return host_.get(); }
  [[nodiscard]] const TierStore* disk() const { return disk_.get(); }

 private:
  std::unique_ptr<TierStore> host_;
  std::unique_ptr<TierStore> disk_;
  void log(CacheEventKind kind, const BlockHash& key, CacheMedium medium);
  // Stores into T2, logging a new block and T2's evictions.
  void put_disk(const BlockHash& key, std::span<const std::byte> payload);

  TierCost host_cost_;
  TierCost disk_cost_;
  std::atomic<bool> record_{false};
  Mutex events_mu_;
  std::vector<CacheEvent> events_ KEEL_GUARDED_BY(events_mu_);
};

}  // namespace keel::kv
