// Session pins (KV kept across tool calls): the KvPins policy on its own — TTL expiry on a manual
// clock, the per-tenant and total caps releasing the oldest pin first (a pin alone over a cap keeps
// its prefix), subsumed pins, distinct-block counting, release by id and oldest — and through the
// KvCacheManager: pinned blocks survive pressure that evicts unpinned ones, an expired pin's blocks
// become ordinary cached blocks (evicted and logged for demotion under pressure), caps give blocks
// back, a history rewritten from some block on still hits up to that block.
#include "kv/kv_pins.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/clock.h"
#include "kv/kv_cache_manager.h"

namespace keel::kv {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<int32_t>;

constexpr int64_t kSecond = 1'000'000'000;

KvPinLimits pin_limits(int32_t max_blocks, int32_t per_tenant = 0, int64_t ttl_ns = 60 * kSecond) {
  return KvPinLimits{ttl_ns, max_blocks, per_tenant};
}

Ids pin(KvPins& pins, PinId id, const std::string& tenant, const Ids& blocks, int64_t now,
        std::vector<ReleasedPin>* released = nullptr) {
  std::vector<ReleasedPin> ignored;
  return pins.add(id, tenant, blocks, now, released != nullptr ? released : &ignored);
}

Ids ids_of(const std::vector<ReleasedPin>& r) {
  Ids out;
  for (const ReleasedPin& p : r) out.push_back(static_cast<BlockId>(p.id));
  return out;
}

TEST(KvPinsTest, OffPinsNothing) {
  for (const KvPinLimits& l : {pin_limits(0), pin_limits(8, 0, 0)}) {
    KvPins pins(l);
    EXPECT_TRUE(pin(pins, 1, "", {0, 1}, 0).empty());
    EXPECT_EQ(pins.num_pins(), 0);
  }
  KvPins pins(pin_limits(8));
  EXPECT_TRUE(pin(pins, 1, "", {}, 0).empty());  // nothing published
  EXPECT_EQ(pin(pins, 1, "", {0, 1}, 0), (Ids{0, 1}));
  EXPECT_TRUE(pin(pins, 1, "", {2}, 0).empty());  // already pinned
  EXPECT_EQ(pins.num_added(), 1);
}

TEST(KvPinsTest, TtlExpiryOnTheCallersClock) {
  ManualClock clock;
  KvPins pins(pin_limits(16, 0, 10 * kSecond));
  pin(pins, 1, "", {0, 1}, clock.now_ns());
  clock.advance_ns(4 * kSecond);
  pin(pins, 2, "", {5}, clock.now_ns());
  EXPECT_EQ(pins.next_deadline_ns(), 10 * kSecond);
  clock.advance_ns(6 * kSecond - 1);
  EXPECT_TRUE(pins.expire(clock.now_ns()).empty());
  clock.advance_ns(1);
  const std::vector<ReleasedPin> gone = pins.expire(clock.now_ns());
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].id, 1);
  EXPECT_EQ(gone[0].blocks, (Ids{0, 1}));
  EXPECT_EQ(gone[0].reason, PinRelease::kTtl);
  EXPECT_EQ(pins.num_blocks(), 1);
  EXPECT_EQ(pins.next_deadline_ns(), 14 * kSecond);
  clock.advance_ns(4 * kSecond);
  EXPECT_EQ(pins.expire(clock.now_ns()).size(), 1u);
  EXPECT_FALSE(pins.next_deadline_ns().has_value());
  EXPECT_EQ(pins.num_released(PinRelease::kTtl), 2);
  EXPECT_TRUE(pins.check_invariants().ok());
}

TEST(KvPinsTest, TenantCapReleasesThatTenantsOldestPin) {
  KvPins pins(pin_limits(100, 5));
  pin(pins, 1, "a", {0, 1, 2}, 0);
  pin(pins, 2, "b", {20, 21, 22, 23}, 1);
  std::vector<ReleasedPin> released;
  EXPECT_EQ(pin(pins, 3, "a", {10, 11, 12}, 2, &released), (Ids{10, 11, 12}));
  EXPECT_EQ(ids_of(released), (Ids{1}));  // a's oldest, not b's older one
  EXPECT_EQ(released[0].reason, PinRelease::kCap);
  EXPECT_EQ(pins.tenant_blocks("a"), 3);
  EXPECT_EQ(pins.tenant_blocks("b"), 4);
  EXPECT_EQ(pins.blocks_by_tenant(), (std::map<std::string, int32_t>{{"a", 3}, {"b", 4}}));
  // Requests of no tenant are bounded by the total cap only.
  EXPECT_EQ(pin(pins, 4, "", {30, 31, 32, 33, 34, 35, 36}, 3).size(), 7u);
  EXPECT_EQ(pins.num_released(PinRelease::kCap), 1);
  EXPECT_TRUE(pins.check_invariants().ok());
}

TEST(KvPinsTest, TotalCapReleasesTheOldestPinOfAnyTenant) {
  KvPins pins(pin_limits(6, 4));
  pin(pins, 1, "a", {0, 1}, 0);
  pin(pins, 2, "b", {10, 11}, 1);
  pin(pins, 3, "a", {20, 21}, 2);
  std::vector<ReleasedPin> released;
  pin(pins, 4, "c", {30, 31, 32}, 3, &released);
  EXPECT_EQ(ids_of(released), (Ids{1, 2}));  // oldest first, until 6 blocks fit
  EXPECT_EQ(pins.num_blocks(), 5);
  EXPECT_EQ(pins.num_pins(), 2);
  EXPECT_TRUE(pins.check_invariants().ok());
}

TEST(KvPinsTest, APinAloneOverACapKeepsItsPrefix) {
  KvPins pins(pin_limits(6, 3));
  std::vector<ReleasedPin> released;
  pin(pins, 1, "a", {0, 1}, 0);
  EXPECT_EQ(pin(pins, 2, "a", {10, 11, 12, 13, 14}, 1, &released), (Ids{10, 11, 12}));
  EXPECT_EQ(ids_of(released), (Ids{1}));
  EXPECT_EQ(pin(pins, 3, "", {20, 21, 22, 23, 24, 25, 26, 27}, 2), (Ids{20, 21, 22, 23, 24, 25}));
  EXPECT_EQ(pins.num_blocks(), 6);
  EXPECT_TRUE(pins.check_invariants().ok());
}

TEST(KvPinsTest, OverlappingPinsCountBlocksOnceAndSubsumedOnesGo) {
  KvPins pins(pin_limits(5));
  pin(pins, 1, "a", {0, 1, 2}, 0);
  pin(pins, 2, "a", {0, 1, 7}, 1);  // a sibling turn: shares two blocks
  EXPECT_EQ(pins.num_pins(), 2);
  EXPECT_EQ(pins.num_blocks(), 4);
  pin(pins, 3, "b", {0, 1, 2, 7}, 2);  // another tenant's pin subsumes no pin of a
  EXPECT_EQ(pins.num_pins(), 3);
  EXPECT_EQ(pins.num_blocks(), 4);
  std::vector<ReleasedPin> released;
  pin(pins, 4, "a", {0, 1, 2, 8}, 3, &released);  // the next turn after pin 1: holds all of it
  EXPECT_EQ(ids_of(released), (Ids{1}));
  EXPECT_EQ(released[0].reason, PinRelease::kSubsumed);
  EXPECT_EQ(pins.num_blocks(), 5);
  EXPECT_TRUE(pins.pinned(8));
  EXPECT_FALSE(pins.pinned(9));
  EXPECT_TRUE(pins.check_invariants().ok());
}

TEST(KvPinsTest, ReleaseByIdAndAll) {
  KvPins pins(pin_limits(16));
  pin(pins, 1, "", {0, 1}, 0);
  pin(pins, 2, "", {2}, 0);
  EXPECT_FALSE(pins.release(9).has_value());
  const std::optional<ReleasedPin> r = pins.release(1);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->blocks, (Ids{0, 1}));
  EXPECT_EQ(r->reason, PinRelease::kReleased);
  pin(pins, 3, "", {3}, 1);
  const std::optional<ReleasedPin> oldest = pins.release_oldest();
  ASSERT_TRUE(oldest.has_value());
  EXPECT_EQ(oldest->id, 2);
  EXPECT_EQ(oldest->reason, PinRelease::kPressure);
  EXPECT_EQ(pins.release_all().size(), 1u);
  EXPECT_EQ(pins.num_pins(), 0);
  EXPECT_FALSE(pins.release_oldest().has_value());
  EXPECT_EQ(pins.num_released(PinRelease::kReleased), 2);
  EXPECT_EQ(pins.num_released(PinRelease::kPressure), 1);
  EXPECT_EQ(pin_release_name(PinRelease::kSubsumed), "subsumed");
  EXPECT_TRUE(pins.check_invariants().ok());
}

// --- through the KvCacheManager ---

const BlockHash kPinExtra = request_extra_key(BlockHash{42, 0}, "");

Tokens run_of(int32_t n, int32_t first) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCacheManager make_pinned(int32_t num_blocks, const KvPinLimits& pins, bool record = false) {
  KvCacheConfig c{num_blocks, 4, true, record};
  c.pins = pins;
  return KvCacheManager(c);
}

// Request `id` computes `tokens` (published) and finishes; with `pin`, its blocks are pinned first.
void finish_turn(KvCacheManager& kv, RequestKey id, const Tokens& tokens, const std::string& tenant,
                 int64_t now, bool pin) {
  ASSERT_TRUE(kv.allocate(id, static_cast<int32_t>(tokens.size())).has_value());
  kv.publish_full_blocks(id, tokens, static_cast<int32_t>(tokens.size()), kPinExtra);
  if (pin) kv.pin_published(id, id, tenant, now);
  kv.free(id);
}

// Tokens of `tokens` the prefix cache would serve to a prompt that extends them.
int32_t pinned_hit(const KvCacheManager& kv, Tokens tokens) {
  tokens.push_back(999);
  return kv.lookup_prefix(tokens, kPinExtra).num_tokens;
}

// Other traffic: requests of fresh tokens that together take every free block, twice over.
void churn_pool(KvCacheManager& kv, RequestKey first_id) {
  for (RequestKey id = first_id; id < first_id + 2; ++id) {
    const int32_t n = kv.num_free_blocks() * 4;
    ASSERT_GT(n, 0);
    finish_turn(kv, id, run_of(n, static_cast<int32_t>(1000 * id)), "", 0, false);
  }
}

TEST(KvCacheManagerPinsTest, PinnedBlocksSurvivePressureThatEvictsUnpinnedOnes) {
  KvCacheManager kv = make_pinned(12, pin_limits(6));
  const Tokens session = run_of(12, 0);  // 3 blocks
  const Tokens other = run_of(12, 500);
  finish_turn(kv, 1, session, "", 0, true);
  finish_turn(kv, 2, other, "", 0, false);
  EXPECT_EQ(kv.pins().num_blocks(), 3);
  EXPECT_EQ(kv.num_free_blocks(), 9);  // pinned blocks are referenced, not free
  EXPECT_EQ(pinned_hit(kv, session), 12);
  EXPECT_EQ(pinned_hit(kv, other), 12);
  churn_pool(kv, 10);
  EXPECT_EQ(pinned_hit(kv, session), 12);
  EXPECT_EQ(pinned_hit(kv, other), 0);
  // Nothing may take a pinned block: a request larger than the free blocks is refused.
  EXPECT_FALSE(kv.allocate(20, 10 * 4).has_value());
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerPinsTest, ExpiredPinsBecomeOrdinaryCachedBlocks) {
  ManualClock clock;
  KvCacheManager kv = make_pinned(12, pin_limits(6, 0, 30 * kSecond), /*record=*/true);
  const Tokens session = run_of(12, 0);
  finish_turn(kv, 1, session, "", clock.now_ns(), true);
  clock.advance_ns(29 * kSecond);
  kv.expire_pins(clock.now_ns());
  EXPECT_EQ(kv.pins().num_pins(), 1);
  clock.advance_ns(kSecond);
  kv.expire_pins(clock.now_ns());
  EXPECT_EQ(kv.pins().num_pins(), 0);
  EXPECT_EQ(kv.pins().num_released(PinRelease::kTtl), 1);
  EXPECT_EQ(kv.num_free_blocks(), 12);
  EXPECT_EQ(pinned_hit(kv, session), 12);  // still cached until something needs the room
  // Other traffic needs every block: the session's are evicted like any cached block, and logged
  // for demotion to the tiers (the only cached blocks in the pool).
  finish_turn(kv, 10, run_of(48, 5000), "", clock.now_ns(), false);
  EXPECT_EQ(pinned_hit(kv, session), 0);
  Ids demoted;
  for (const EvictedCachedBlock& e : kv.take_evictions()) demoted.push_back(e.block);
  std::sort(demoted.begin(), demoted.end());
  EXPECT_EQ(demoted, (Ids{0, 1, 2}));
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerPinsTest, CapsReleaseTheOldestAndGiveTheBlocksBack) {
  KvCacheManager kv = make_pinned(32, pin_limits(5, 3));
  finish_turn(kv, 1, run_of(8, 0), "a", 0, true);    // a: 2 blocks
  finish_turn(kv, 2, run_of(8, 100), "b", 1, true);  // b: 2 blocks
  finish_turn(kv, 3, run_of(8, 200), "a", 2, true);  // a: 4 > 3 → pin 1 goes
  EXPECT_EQ(kv.pins().tenant_blocks("a"), 2);
  EXPECT_EQ(kv.pins().num_blocks(), 4);
  finish_turn(kv, 4, run_of(8, 300), "c", 3, true);  // 6 > 5 → b's pin 2, the oldest, goes
  EXPECT_EQ(kv.pins().num_pins(), 2);
  EXPECT_EQ(kv.pins().num_released(PinRelease::kCap), 2);
  EXPECT_EQ(kv.num_free_blocks(), 32 - 4);
  EXPECT_TRUE(kv.release_pin(3));
  EXPECT_FALSE(kv.release_pin(3));
  EXPECT_EQ(kv.num_free_blocks(), 32 - 2);
  finish_turn(kv, 5, run_of(8, 400), "d", 4, true);
  EXPECT_TRUE(kv.release_oldest_pin());  // pin 4, the older
  EXPECT_EQ(kv.pins().num_pins(), 1);
  EXPECT_EQ(kv.pins().num_released(PinRelease::kPressure), 1);
  EXPECT_EQ(kv.num_free_blocks(), 32 - 2);
  kv.reset_prefix_cache();  // no hash left to find: the pins go too
  EXPECT_EQ(kv.pins().num_pins(), 0);
  EXPECT_EQ(kv.num_free_blocks(), 32);
  EXPECT_TRUE(kv.check_invariants().ok());
}

// A template that rewrites an earlier turn (Qwen3 drops earlier thinking): the next prompt shares
// the pinned history up to some token; the cache serves every block before the first that
// differs. A pinned block the next turn must write into is copied, not changed.
TEST(KvCacheManagerPinsTest, ARewrittenHistoryHitsUpToTheFirstDifferingBlock) {
  KvCacheManager kv = make_pinned(16, pin_limits(8));
  const Tokens turn1 = run_of(20, 0);  // 5 blocks
  finish_turn(kv, 1, turn1, "", 0, true);
  churn_pool(kv, 10);
  Tokens turn2(turn1.begin(), turn1.begin() + 10);  // differs from token 10: inside block 2
  for (int32_t t : {70, 71, 72, 73, 74, 75}) turn2.push_back(t);
  EXPECT_EQ(kv.lookup_prefix(turn2, kPinExtra).num_tokens, 8);
  // A block-aligned resend of 8 pinned tokens: the hit stops one token short, and the block that
  // token lands in is shared with the pin — copy-on-write.
  const Tokens resend(turn1.begin(), turn1.begin() + 8);
  const KvCacheManager::PrefixHit h = kv.lookup_prefix(resend, kPinExtra);
  ASSERT_EQ(h.num_tokens, 7);
  ASSERT_TRUE(kv.allocate(30, 8, &h).has_value());
  const KvCacheManager::WritableResult w = kv.make_writable(30, 7);
  ASSERT_TRUE(w.copy.has_value());
  EXPECT_EQ(w.copy->first, h.blocks[1]);
  EXPECT_EQ(pinned_hit(kv, turn1), 20);  // the pinned original is intact
  EXPECT_TRUE(kv.check_invariants().ok());
}

}  // namespace
}  // namespace keel::kv
