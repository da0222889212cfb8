// KvPins: the session pins of the prefix cache — KV kept across tool calls (docs/agents.md) — as
// a pure policy over block ids: which pins exist, whose they are, when they expire, and which give
// way when a cap is passed. It takes no block references itself: its owner (KvCacheManager) holds
// one reference per pin and block, and gives back those of every pin handed back as released.
// Invariants (check_invariants()): a pin's blocks are distinct and non-empty; the distinct blocks
// of all pins ≤ max_blocks, and of one named tenant's pins ≤ max_blocks_per_tenant; when a new pin
// passes a cap, the oldest other pins give way first, and a pin alone over a cap keeps its first
// blocks (a prefix is still a prefix). Deadlines follow creation order (one TTL, the caller's
// monotonic clock); time only enters through now_ns arguments, so tests drive it by hand.
// Thread safety: none; owned by the engine thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::kv {

using PinId = int64_t;  // the engine uses the finished request's key

struct KvPinLimits {
  int64_t ttl_ns = 0;      // a pin lives this long; ≤ 0: pinning is off
  int32_t max_blocks = 0;  // distinct blocks all pins together may hold; ≤ 0: pinning is off
  // Distinct blocks the pins of one named tenant may hold; ≤ 0: no cap of its own. Requests of no
  // tenant ("") are bounded by max_blocks only.
  int32_t max_blocks_per_tenant = 0;
  [[nodiscard]] bool enabled() const { return ttl_ns > 0 && max_blocks > 0; }
};

// Why a pin let go of its blocks.
enum class PinRelease : uint8_t {
  kTtl,       // its deadline passed
  kCap,       // a newer pin passed the tenant's or the total cap; oldest first
  kSubsumed,  // a newer pin of its tenant holds every one of its blocks
  kReleased,  // its owner asked (the turn did not end in a tool call; the cache was reset)
  kPressure,  // nothing could run without its blocks (release_oldest)
};
inline constexpr size_t kNumPinReleases = 5;
// "ttl", "cap", "subsumed", "released", "pressure"
std::string_view pin_release_name(PinRelease r);

struct ReleasedPin {
  PinId id = 0;
  std::vector<BlockId> blocks;  // the references to give back
  PinRelease reason = PinRelease::kTtl;
};

class KvPins {
 public:
  explicit KvPins(const KvPinLimits& limits) : limits_(limits) {}

  // Pins `blocks` (a sequence's prefix blocks, in order) as pin `id` of `tenant` until
  // now_ns + ttl. Pins it displaces are appended to *released (subsumed ones, then the oldest over
  // a cap). Returns the blocks pinned: a prefix of `blocks`, empty when pinning is off, `blocks` is
  // empty or `id` is pinned already.
  std::vector<BlockId> add(PinId id, const std::string& tenant, std::span<const BlockId> blocks,
                           int64_t now_ns, std::vector<ReleasedPin>* released);
  // Removes every pin whose deadline is ≤ now_ns.
  std::vector<ReleasedPin> expire(int64_t now_ns);
  // Removes pin `id` (reason kReleased); nullopt when there is none.
  std::optional<ReleasedPin> release(PinId id);
  // Removes every pin (reason kReleased).
  std::vector<ReleasedPin> release_all();
  // Removes the oldest pin (reason kPressure: its owner needs the blocks); nullopt when none.
  std::optional<ReleasedPin> release_oldest();

  [[nodiscard]] std::optional<int64_t> next_deadline_ns() const;
  [[nodiscard]] int32_t num_pins() const { return static_cast<int32_t>(pins_.size()); }
  [[nodiscard]] int32_t num_blocks() const { return static_cast<int32_t>(refs_.size()); }
  // Distinct blocks pinned for `tenant` ("" = requests of no tenant).
  [[nodiscard]] int32_t tenant_blocks(std::string_view tenant) const;
  // Distinct blocks pinned per named tenant with pins.
  [[nodiscard]] std::map<std::string, int32_t> blocks_by_tenant() const;
  [[nodiscard]] bool pinned(BlockId b) const { return refs_.contains(b); }
  [[nodiscard]] int64_t num_added() const { return num_added_; }
  [[nodiscard]] int64_t num_released(PinRelease r) const {
    return num_released_[static_cast<size_t>(r)];
  }
  [[nodiscard]] const KvPinLimits& limits() const { return limits_; }
  // Adds, for every pin and block, one to (*refs)[block] (the owner's reference check).
  void count_refs(std::vector<int32_t>* refs) const;
  // Verifies the invariants above; Internal error naming the first violation.
  [[nodiscard]] Status check_invariants() const;

 private:
  struct Pin {
    PinId id = 0;
    std::string tenant;
    std::vector<BlockId> blocks;
    int64_t deadline_ns = 0;
  };
  using BlockRefs = std::unordered_map<BlockId, int32_t>;

  // How many of `n` blocks a new pin of `tenant` may keep.
  [[nodiscard]] size_t room_for(const std::string& tenant, size_t n) const;
  // Releases the older pins of `newest`'s tenant whose blocks `newest` all holds, oldest first.
  void release_subsumed(const Pin& newest, std::vector<ReleasedPin>* released);
  // While `over()` holds, releases the oldest pin other than `keep` (of `tenant` when given).
  template <typename Over>
  void release_oldest(PinId keep, const std::string* tenant, Over over,
                      std::vector<ReleasedPin>* released);
  ReleasedPin take(std::map<uint64_t, Pin>::iterator it, PinRelease reason);

  KvPinLimits limits_;
  std::map<uint64_t, Pin> pins_;                            // by creation order (oldest first)
  std::unordered_map<PinId, uint64_t> seq_of_;              // pin id → its key in pins_
  BlockRefs refs_;                                          // block → pins holding it
  std::unordered_map<std::string, BlockRefs> tenant_refs_;  // per tenant ("" included)
  uint64_t next_seq_ = 0;
  int64_t num_added_ = 0;
  std::array<int64_t, kNumPinReleases> num_released_{};
};

}  // namespace keel::kv
