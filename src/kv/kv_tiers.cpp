// KvTiers: see kv_tiers.h.
#include "kv/kv_tiers.h"

#include <utility>
#include <vector>

namespace keel::kv {

KvTiers::KvTiers(std::unique_ptr<TierStore> host, std::unique_ptr<TierStore> disk)
    : host_(std::move(host)), disk_(std::move(disk)) {}

void KvTiers::set_record_events(bool on) {
  record_.store(on);
  if (!on) {
    MutexLock lock(events_mu_);
    events_.clear();
  }
}

std::vector<CacheEvent> KvTiers::take_events() {
  MutexLock lock(events_mu_);
  std::vector<CacheEvent> out;
  out.swap(events_);
  return out;
}

void KvTiers::log(CacheEventKind kind, const BlockHash& key, CacheMedium medium) {
  if (!record_.load(std::memory_order_relaxed)) return;
  MutexLock lock(events_mu_);
  events_.push_back({kind, key, kRootHash, {}, medium});
}

void KvTiers::put_disk(const BlockHash& key, std::span<const std::byte> payload) {
  const bool had = disk_->contains(key);
  // T2, the last tier, drops its LRU evictions without reporting them (TierStore::put would have
  // to read each victim's payload back): those are not logged (see kv_tiers.h).
  const Status s = disk_->put(key, payload, nullptr);
  if (s.ok() && !had) log(CacheEventKind::kStored, key, CacheMedium::kDisk);
}

void KvTiers::demote(const BlockHash& key, std::span<const std::byte> payload) {
  if (host_ != nullptr) {
    const bool had = host_->contains(key);
    std::vector<EvictedBlock> evicted;
    const Status s = host_->put(key, payload, &evicted);
    if (s.ok() && !had) log(CacheEventKind::kStored, key, CacheMedium::kHost);
    for (const EvictedBlock& e : evicted) {
      log(CacheEventKind::kRemoved, e.key, CacheMedium::kHost);
      // Blocks pushed out of T1 go down (already there when written through below: a refresh).
      if (disk_ != nullptr) put_disk(e.key, e.payload);
    }
  }
  // Write-through: T2 holds every demoted block, so the cache survives a restart or a crash.
  if (disk_ != nullptr) put_disk(key, payload);
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
  if (disk_ == nullptr) return false;
  const Status s = disk_->get(key, out);
  // A damaged copy is dropped by the tier: the index must forget it too.
  if (s.code() == StatusCode::kCorrupt) log(CacheEventKind::kRemoved, key, CacheMedium::kDisk);
  return s.ok();
}

}  // namespace keel::kv
