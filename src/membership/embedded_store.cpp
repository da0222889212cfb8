// EmbeddedStore; see embedded_store.h.
#include "membership/embedded_store.h"

#include <algorithm>

namespace keel::membership {

EmbeddedStore::EmbeddedStore(const Clock* clock) : clock_(clock) {}

int64_t EmbeddedStore::grant(int ttl_s) {
  MutexLock lock(mu_);
  sweep_locked();
  const int64_t ttl_ns = static_cast<int64_t>(ttl_s) * 1000000000;
  const int64_t id = next_lease_id_++;
  leases_[id] = {ttl_ns, clock_->now_ns() + ttl_ns};
  return id;
}

Status EmbeddedStore::keepalive(int64_t lease_id) {
  MutexLock lock(mu_);
  sweep_locked();
  auto it = leases_.find(lease_id);
  if (it == leases_.end()) {
    return Status::not_found("lease " + std::to_string(lease_id) + " expired or revoked");
  }
  it->second.deadline_ns = clock_->now_ns() + it->second.ttl_ns;
  return {};
}

void EmbeddedStore::revoke(int64_t lease_id) {
  MutexLock lock(mu_);
  leases_.erase(lease_id);
  sweep_locked();  // deletes the keys of leases that no longer exist
}

Status EmbeddedStore::put(const std::string& key, const std::string& value, int64_t lease_id) {
  MutexLock lock(mu_);
  sweep_locked();
  if (leases_.count(lease_id) == 0) {
    return Status::not_found("lease " + std::to_string(lease_id) + " expired or revoked");
  }
  const auto it = entries_.find(key);
  ++revision_;
  entries_[key] = {value, lease_id, it == entries_.end() ? revision_ : it->second.create_revision};
  publish_locked({false, key, value});
  return {};
}

Result<bool> EmbeddedStore::put_if_absent(const std::string& key, const std::string& value,
                                          int64_t lease_id) {
  MutexLock lock(mu_);
  sweep_locked();
  if (leases_.count(lease_id) == 0) {
    return Status::not_found("lease " + std::to_string(lease_id) + " expired or revoked");
  }
  auto it = entries_.find(key);
  if (it != entries_.end()) return it->second.lease_id == lease_id;
  entries_[key] = {value, lease_id, ++revision_};
  publish_locked({false, key, value});
  return true;
}

void EmbeddedStore::erase_if_owned(const std::string& key, int64_t lease_id) {
  MutexLock lock(mu_);
  sweep_locked();
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.lease_id == lease_id) erase_locked(key);
}

std::optional<std::string> EmbeddedStore::get(const std::string& key) {
  MutexLock lock(mu_);
  sweep_locked();
  auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second.value;
}

int64_t EmbeddedStore::create_revision_if_owned(const std::string& key, int64_t lease_id) {
  MutexLock lock(mu_);
  sweep_locked();
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.lease_id == lease_id ? it->second.create_revision : 0;
}

std::vector<std::pair<std::string, std::string>> EmbeddedStore::range(const std::string& prefix) {
  MutexLock lock(mu_);
  sweep_locked();
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = entries_.lower_bound(prefix);
       it != entries_.end() && it->first.compare(0, prefix.size(), prefix) == 0; ++it) {
    out.emplace_back(it->first, it->second.value);
  }
  return out;
}

std::shared_ptr<StoreSubscription> EmbeddedStore::subscribe(const std::string& prefix) {
  MutexLock lock(mu_);
  sweep_locked();
  auto sub = std::make_shared<StoreSubscription>();
  sub->prefix = prefix;
  subs_.push_back(sub);
  return sub;
}

void EmbeddedStore::unsubscribe(const std::shared_ptr<StoreSubscription>& sub) {
  MutexLock lock(mu_);
  subs_.erase(std::remove(subs_.begin(), subs_.end(), sub), subs_.end());
}

std::optional<StoreEvent> EmbeddedStore::next_event(const std::shared_ptr<StoreSubscription>& sub,
                                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  UniqueLock lock(mu_);
  while (true) {
    sweep_locked();
    std::deque<StoreEvent>& events = events_of(*sub);
    if (!events.empty()) {
      StoreEvent e = std::move(events.front());
      events.pop_front();
      return e;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return std::nullopt;
    // Wake at least every 50 ms to apply lease expiry.
    cv_.wait_until(lock.native(), std::min(deadline, now + std::chrono::milliseconds(50)));
  }
}

void EmbeddedStore::sweep_locked() {
  const int64_t now = clock_->now_ns();
  for (auto it = leases_.begin(); it != leases_.end();) {
    it = it->second.deadline_ns <= now ? leases_.erase(it) : std::next(it);
  }
  std::vector<std::string> orphans;
  for (const auto& [key, entry] : entries_) {
    if (leases_.count(entry.lease_id) == 0) orphans.push_back(key);
  }
  for (const std::string& key : orphans) erase_locked(key);
}

void EmbeddedStore::erase_locked(const std::string& key) {
  entries_.erase(key);
  ++revision_;
  publish_locked({true, key, ""});
}

void EmbeddedStore::publish_locked(const StoreEvent& e) {
  for (const auto& sub : subs_) {
    if (e.key.compare(0, sub->prefix.size(), sub->prefix) == 0) events_of(*sub).push_back(e);
  }
  cv_.notify_all();
}

}  // namespace keel::membership
