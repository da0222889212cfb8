// HostTier: see host_tier.h.
#include "kv/host_tier.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>

#include "core/check.h"

namespace keel::kv {

HostTier::HostTier(int64_t capacity_bytes, size_t payload_bytes) : payload_bytes_(payload_bytes) {
  KEEL_CHECK(capacity_bytes >= 0 && payload_bytes > 0);
  stats_.capacity_bytes = capacity_bytes;
}

Status HostTier::put(const BlockHash& key, std::span<const std::byte> payload,
                     std::vector<EvictedBlock>* evicted) {
  if (payload.size() != payload_bytes_) {
    return Status::invalid_argument("host KV tier: payload of " + std::to_string(payload.size()) +
                                    " bytes, expected " + std::to_string(payload_bytes_));
  }
  const auto size = static_cast<int64_t>(payload.size());
  MutexLock lock(mu_);
  if (auto it = entries_.find(key); it != entries_.end()) {
    lru_.splice(lru_.end(), lru_, it->second.lru);
    return {};
  }
  if (size > stats_.capacity_bytes) {
    return Status::out_of_range("host KV tier: a block of " + std::to_string(size) +
                                " bytes exceeds the capacity of " +
                                std::to_string(stats_.capacity_bytes) + " bytes");
  }
  while (stats_.used_bytes + size > stats_.capacity_bytes) {
    auto victim = entries_.find(lru_.front());
    if (evicted != nullptr) evicted->push_back({victim->first, std::move(victim->second.payload)});
    stats_.used_bytes -= static_cast<int64_t>(payload_bytes_);
    ++stats_.evictions;
    lru_.pop_front();
    entries_.erase(victim);
  }
  Entry entry;
  entry.payload.assign(payload.begin(), payload.end());
  entry.lru = lru_.insert(lru_.end(), key);
  entries_.emplace(key, std::move(entry));
  stats_.used_bytes += size;
  stats_.bytes_in += size;
  return {};
}

Status HostTier::get(const BlockHash& key, std::span<std::byte> out) {
  KEEL_CHECK(out.size() == payload_bytes_);
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    ++stats_.misses;
    return Status::not_found("host KV tier: block not held");
  }
  std::memcpy(out.data(), it->second.payload.data(), payload_bytes_);
  lru_.splice(lru_.end(), lru_, it->second.lru);
  ++stats_.hits;
  stats_.bytes_out += static_cast<int64_t>(payload_bytes_);
  return {};
}

bool HostTier::contains(const BlockHash& key) const {
  MutexLock lock(mu_);
  return entries_.count(key) > 0;
}

void HostTier::erase(const BlockHash& key) {
  MutexLock lock(mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  lru_.erase(it->second.lru);
  entries_.erase(it);
  stats_.used_bytes -= static_cast<int64_t>(payload_bytes_);
}

Result<TierCost> HostTier::measure_read() {
  std::vector<std::byte> src(payload_bytes_, std::byte{1}), dst(payload_bytes_);
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), payload_bytes_);
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  TierCost c;
  c.seconds_per_byte = best / static_cast<double>(payload_bytes_);
  return c;
}

TierStats HostTier::stats() const {
  MutexLock lock(mu_);
  TierStats s = stats_;
  s.blocks = static_cast<int64_t>(entries_.size());
  return s;
}

}  // namespace keel::kv
