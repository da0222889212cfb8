// TierStore: a store of KV block payloads keyed by block hash, one per tier below the engine pool
// (T1: HostTier, host DRAM; T2: DiskTier, files). A payload is one block's K/V bytes for every
// layer, opaque here (the engine defines the layout); every payload of one store has one size.
// A store evicts least-recently-used entries to stay within its byte capacity and hands evicted
// payloads back so the caller can demote them to the next tier (T1 → T2); the last tier drops them.
//
// Thread safety: every method may be called from any thread (each store has an internal lock), so
// a transfer thread can promote while the engine thread demotes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "kv/block_hash.h"
#include "kv/tier_cost.h"

namespace keel::kv {

// Counters of one tier (the /metrics per-tier series).
struct TierStats {
  int64_t blocks = 0;          // entries held now
  int64_t used_bytes = 0;      // bytes held now (disk: whole files, headers included)
  int64_t capacity_bytes = 0;  // the configured limit on used_bytes
  int64_t hits = 0;            // get() calls that returned a payload
  int64_t misses = 0;          // get() calls for a key the store does not hold
  int64_t bytes_in = 0;        // payload bytes accepted by put()
  int64_t bytes_out = 0;       // payload bytes returned by get()
  int64_t evictions = 0;       // entries dropped to make room
  int64_t corrupt = 0;         // entries found damaged (checksum, truncation, foreign) and dropped
  int64_t write_errors = 0;    // put() calls whose write failed (disk: I/O error, e.g. unwritable)
  friend bool operator==(const TierStats&, const TierStats&) = default;
};

// An entry evicted by put(), for demotion to the next tier.
struct EvictedBlock {
  BlockHash key;
  std::vector<std::byte> payload;
};

class TierStore {
 public:
  virtual ~TierStore() = default;

  // "host" or "disk" (the metrics label).
  [[nodiscard]] virtual std::string_view name() const = 0;

  // Stores a copy of `payload` under `key` as the most recently used entry, first evicting
  // least-recently-used entries until it fits; when `evicted` is non-null the evicted entries are
  // appended to it (with their payloads, for demotion). A key already held is only refreshed.
  // Errors: InvalidArgument (payload of the wrong size), OutOfRange (larger than the capacity),
  // IoError (disk); on error nothing was stored (evictions may have happened).
  virtual Status put(const BlockHash& key, std::span<const std::byte> payload,
                     std::vector<EvictedBlock>* evicted) = 0;

  // Copies key's payload into `out` (whose size must be the store's payload size) and makes the
  // entry most recently used. NotFound when absent (a miss); Corrupt when the stored copy fails
  // validation — the entry is dropped and counted, and `out` must not be used.
  virtual Status get(const BlockHash& key, std::span<std::byte> out) = 0;

  [[nodiscard]] virtual bool contains(const BlockHash& key) const = 0;
  // Drops `key` (no-op when absent).
  virtual void erase(const BlockHash& key) = 0;
  [[nodiscard]] virtual TierStats stats() const = 0;
  // Times reads of a probe the size of one payload (and a small one, for the latency) through
  // the same path get() uses; stores nothing and changes no counter. Disk: IoError when the
  // probe cannot be written or read.
  virtual Result<TierCost> measure_read() = 0;
};

}  // namespace keel::kv
