// KvTiers: see kv_tiers.h.
#include "kv/kv_tiers.h"

#include <utility>
#include <vector>

namespace keel::kv {

KvTiers::KvTiers(std::unique_ptr<TierStore> host, std::unique_ptr<TierStore> disk)
    : host_(std::move(host)), disk_(std::move(disk)) {}

void KvTiers::demote(const BlockHash& key, std::span<const std::byte> payload) {
  if (host_ != nullptr) {
    std::vector<EvictedBlock> evicted;
    (void)host_->put(key, payload, &evicted);
    // Blocks pushed out of T1 go down (already there when written through below: a refresh).
    if (disk_ != nullptr) {
      for (const EvictedBlock& e : evicted) (void)disk_->put(e.key, e.payload, nullptr);
    }
  }
  // Write-through: T2 holds every demoted block, so the cache survives a restart or a crash.
  if (disk_ != nullptr) (void)disk_->put(key, payload, nullptr);
}

bool KvTiers::contains(const BlockHash& key) const {
  return (host_ != nullptr && host_->contains(key)) || (disk_ != nullptr && disk_->contains(key));
}

TierKind KvTiers::where(const BlockHash& key) const {
  if (host_ != nullptr && host_->contains(key)) return TierKind::kHost;
  if (disk_ != nullptr && disk_->contains(key)) return TierKind::kDisk;
  return TierKind::kNone;
}

Status KvTiers::measure() {
  Status first;
  for (auto [tier, cost] :
       {std::pair{host_.get(), &host_cost_}, std::pair{disk_.get(), &disk_cost_}}) {
    if (tier == nullptr) continue;
    Result<TierCost> c = tier->measure_read();
    if (c.ok()) {
      *cost = *c;
    } else if (first.ok()) {
      first = c.status();
    }
  }
  return first;
}

bool KvTiers::fetch(const BlockHash& key, std::span<std::byte> out) {
  if (host_ != nullptr && host_->get(key, out).ok()) return true;
  return disk_ != nullptr && disk_->get(key, out).ok();
}

}  // namespace keel::kv
