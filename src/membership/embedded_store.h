// EmbeddedStore: the in-process key-value store behind EmbeddedMembership — keys with values,
// leases with deadlines, prefix subscriptions — the subset of etcd's model that membership needs,
// for one machine. A lease's keys are deleted when it is revoked or its deadline passes; expiry
// is applied by sweep(), which every operation runs first (and watchers run while they wait), so
// the store has no thread of its own. Each put or delete under a subscribed prefix is queued to
// the subscriber in store order.
//
// Thread safety: every method may be called from any thread (one mutex). The clock is borrowed
// and must outlive the store.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "core/result.h"

namespace keel::membership {

struct StoreEvent {
  bool deleted = false;  // else a put
  std::string key;
  std::string value;  // empty on delete
};

// A subscriber's queue of events under its prefix.
struct StoreSubscription {
  std::string prefix;

 private:
  friend class EmbeddedStore;
  // Guarded by the store's mutex, which a guarded_by here cannot name (another object's member):
  // the store reaches it only through events_of(), which requires that mutex.
  std::deque<StoreEvent> events_;
};

class EmbeddedStore {
 public:
  explicit EmbeddedStore(const Clock* clock);

  int64_t grant(int ttl_s);
  // Pushes the lease's deadline to now + TTL; NotFound when it has expired or was revoked.
  Status keepalive(int64_t lease_id);
  void revoke(int64_t lease_id);
  // Puts key under the lease (NotFound when the lease is gone).
  Status put(const std::string& key, const std::string& value, int64_t lease_id);
  // Puts key only if absent: true when key is now held by this lease (also when it already was).
  Result<bool> put_if_absent(const std::string& key, const std::string& value, int64_t lease_id);
  // Deletes key if it is held by this lease.
  void erase_if_owned(const std::string& key, int64_t lease_id);
  std::optional<std::string> get(const std::string& key);
  // The revision at which `key` was created if `lease_id` holds it now, else 0. Revisions count
  // every put and delete in the store, as etcd's do (a new leadership: a higher revision).
  int64_t create_revision_if_owned(const std::string& key, int64_t lease_id);
  std::vector<std::pair<std::string, std::string>> range(const std::string& prefix);

  std::shared_ptr<StoreSubscription> subscribe(const std::string& prefix);
  void unsubscribe(const std::shared_ptr<StoreSubscription>& sub);
  // Waits up to `timeout` for an event on `sub` (sweeping expired leases meanwhile).
  std::optional<StoreEvent> next_event(const std::shared_ptr<StoreSubscription>& sub,
                                       std::chrono::milliseconds timeout);

 private:
  struct Entry {
    std::string value;
    int64_t lease_id;
    int64_t create_revision;
  };
  struct Lease {
    int64_t ttl_ns;
    int64_t deadline_ns;
  };
  void sweep_locked() KEEL_REQUIRES(mu_);
  void erase_locked(const std::string& key) KEEL_REQUIRES(mu_);
  void publish_locked(const StoreEvent& e) KEEL_REQUIRES(mu_);
  // `sub`'s queue: the one way to it, so that the analysis checks the store's mutex is held.
  std::deque<StoreEvent>& events_of(StoreSubscription& sub) KEEL_REQUIRES(mu_) {
    return sub.events_;
  }

  const Clock* clock_;
  Mutex mu_;
  std::condition_variable cv_;
  int64_t next_lease_id_ KEEL_GUARDED_BY(mu_) = 1;
  int64_t revision_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<std::string, Entry> entries_ KEEL_GUARDED_BY(mu_);
  std::map<int64_t, Lease> leases_ KEEL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<StoreSubscription>> subs_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::membership
