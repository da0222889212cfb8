// KvTiers: the tiers below the engine pool as one unit — T1 (host DRAM) and T2 (disk), either
// optional. demote() stores an evicted pool block in T1 and writes it through to T2 (so the disk
// copy survives a restart); T1's own evictions move down to T2, and T2 drops its LRU blocks.
// fetch() looks in T1, then T2. A damaged T2 copy is dropped and reported as a miss, so the
// caller recomputes.
//
// Thread safety: as TierStore (each tier locks internally).
#pragma once

#include <memory>
#include <span>

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

  [[nodiscard]] const TierStore* host() const { return host_.get(); }
  [[nodiscard]] const TierStore* disk() const { return disk_.get(); }

 private:
  std::unique_ptr<TierStore> host_;
  std::unique_ptr<TierStore> disk_;
  TierCost host_cost_;
  TierCost disk_cost_;
};

}  // namespace keel::kv
