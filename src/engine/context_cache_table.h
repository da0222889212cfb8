// ContextCacheTable: the one registry of pinned context caches (GenerationRequest::retain_as),
// kept by their owner — the engine, which pins their KV blocks (the test engines reuse it). An
// entry is the cache as callers see it (ContextCacheInfo), the pin that holds its blocks (the
// finished request whose block table the scheduler retains, and the blocks reserved for it) and
// its deadline on the owner's monotonic clock, the only clock caches expire on.
//
// Invariants: a cache past its deadline is never returned (find/list/remove read the clock
// themselves, whether or not the owner has swept it yet); a cache is seen only with its own salt
// (another salt's cache and an unknown one look the same); every pin leaves the table exactly
// once — replaced in put(), through remove() or take_expired() — and whoever takes it releases it.
//
// Thread safety: every method may be called from any thread (one mutex). The owner's thread calls
// put() and take_expired(); request threads call find(), list() and remove().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.h"
#include "core/mutex.h"
#include "engine/types.h"

namespace keel::engine {

class ContextCacheTable {
 public:
  // What holds a cache's blocks; its taker releases it.
  struct Pin {
    RequestKey key = 0;           // the finished request whose block table is retained
    int64_t reserved_blocks = 0;  // blocks counted against the context-cache quota
    friend bool operator==(const Pin&, const Pin&) = default;
  };

  // The cache a finishing request with retain_as becomes (what every owner puts).
  static ContextCacheInfo info_for(const GenerationRequest& request, int64_t created_unix_ms);

  // `clock` must outlive the table.
  explicit ContextCacheTable(const Clock* clock) : clock_(clock) {}

  // Adds `info`, pinned by `pin`, live until now + info.ttl_ms. Returns the pin of the cache of
  // the same id it replaces, if any.
  std::optional<Pin> put(ContextCacheInfo info, Pin pin);
  // Cache `id` if it is live and belongs to `salt`.
  [[nodiscard]] std::optional<ContextCacheInfo> find(std::string_view id,
                                                     std::string_view salt) const;
  // The live caches of `salt`, oldest first.
  [[nodiscard]] std::vector<ContextCacheInfo> list(std::string_view salt) const;
  // Removes cache `id` of `salt`; its pin, or nullopt when it is unknown, expired (the owner's
  // sweep takes that pin) or another salt's.
  std::optional<Pin> remove(std::string_view id, std::string_view salt);
  // Removes every cache past its deadline; their pins.
  std::vector<Pin> take_expired();
  // The earliest deadline (the owner's clock, ns), or nullopt when the table is empty.
  [[nodiscard]] std::optional<int64_t> next_deadline_ns() const;
  // Every pin held, expired or not (for stats).
  [[nodiscard]] std::vector<Pin> pins() const;

 private:
  struct Entry {
    ContextCacheInfo info;
    Pin pin;
    int64_t deadline_ns = 0;
    uint64_t seq = 0;  // order of put(): list() is oldest first
  };
  [[nodiscard]] bool live(const Entry& e) const { return e.deadline_ns > clock_->now_ns(); }

  const Clock* clock_;
  mutable Mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ KEEL_GUARDED_BY(mu_);
  uint64_t next_seq_ KEEL_GUARDED_BY(mu_) = 0;
};

}  // namespace keel::engine
