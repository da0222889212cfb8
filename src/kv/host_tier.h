// HostTier (T1): block payloads in host DRAM, LRU within a byte capacity (`--kv-host-bytes`).
// Invariants: used_bytes = Σ payload sizes ≤ capacity; every entry is on the LRU list once.
// Thread safety: internal lock; see TierStore.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "core/thread_annotations.h"
#include "kv/tier_store.h"

namespace keel::kv {

class HostTier final : public TierStore {
 public:
  // `payload_bytes`: the size of every payload (> 0); `capacity_bytes` ≥ 0.
  HostTier(int64_t capacity_bytes, size_t payload_bytes);

  [[nodiscard]] std::string_view name() const override { return "host"; }
  Status put(const BlockHash& key, std::span<const std::byte> payload,
             std::vector<EvictedBlock>* evicted) override;
  Status get(const BlockHash& key, std::span<std::byte> out) override;
  [[nodiscard]] bool contains(const BlockHash& key) const override;
  void erase(const BlockHash& key) override;
  [[nodiscard]] TierStats stats() const override;
  Result<TierCost> measure_read() override;

 private:
  struct Entry {
    std::vector<std::byte> payload;
    std::list<BlockHash>::iterator lru;  // position in lru_
  };

  size_t payload_bytes_;
  mutable Mutex mu_;
  std::list<BlockHash> lru_ KEEL_GUARDED_BY(mu_);  // front: least recently used
  std::unordered_map<BlockHash, Entry, BlockHashHasher> entries_ KEEL_GUARDED_BY(mu_);
  TierStats stats_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::kv
