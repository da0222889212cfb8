// HostTier (T1): round trips, LRU eviction within the byte capacity with evicted payloads handed
// back for demotion, refresh on get/put, counters.
#include "kv/host_tier.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace keel::kv {
namespace {

constexpr size_t kPayload = 64;

std::vector<std::byte> payload(int seed) {
  std::vector<std::byte> p(kPayload);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::byte>(seed * 31 + static_cast<int>(i));
  return p;
}

BlockHash key(uint64_t i) { return {i, ~i}; }

TEST(HostTierTest, PutGetRoundTripAndCounters) {
  HostTier tier(4 * kPayload, kPayload);
  ASSERT_TRUE(tier.put(key(1), payload(1), nullptr).ok());
  std::vector<std::byte> out(kPayload);
  ASSERT_TRUE(tier.get(key(1), out).ok());
  EXPECT_EQ(out, payload(1));
  EXPECT_EQ(tier.get(key(2), out).code(), StatusCode::kNotFound);
  const TierStats s = tier.stats();
  EXPECT_EQ(s.blocks, 1);
  EXPECT_EQ(s.used_bytes, static_cast<int64_t>(kPayload));
  EXPECT_EQ(s.capacity_bytes, static_cast<int64_t>(4 * kPayload));
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.bytes_in, static_cast<int64_t>(kPayload));
  EXPECT_EQ(s.bytes_out, static_cast<int64_t>(kPayload));
  EXPECT_EQ(tier.name(), "host");
}

TEST(HostTierTest, EvictsLeastRecentlyUsedAndHandsPayloadsBack) {
  HostTier tier(3 * kPayload, kPayload);
  for (uint64_t i = 1; i <= 3; ++i)
    ASSERT_TRUE(tier.put(key(i), payload(static_cast<int>(i)), nullptr).ok());
  std::vector<std::byte> out(kPayload);
  ASSERT_TRUE(tier.get(key(1), out).ok());  // 1 becomes most recent: 2 is now the LRU entry
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(key(4), payload(4), &evicted).ok());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, key(2));
  EXPECT_EQ(evicted[0].payload, payload(2));
  EXPECT_FALSE(tier.contains(key(2)));
  EXPECT_TRUE(tier.contains(key(1)));
  EXPECT_TRUE(tier.contains(key(4)));
  EXPECT_EQ(tier.stats().evictions, 1);
  EXPECT_LE(tier.stats().used_bytes, tier.stats().capacity_bytes);
}

TEST(HostTierTest, PutOfAHeldKeyOnlyRefreshes) {
  HostTier tier(2 * kPayload, kPayload);
  ASSERT_TRUE(tier.put(key(1), payload(1), nullptr).ok());
  ASSERT_TRUE(tier.put(key(2), payload(2), nullptr).ok());
  ASSERT_TRUE(tier.put(key(1), payload(9), nullptr).ok());  // refresh, content unchanged
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(key(3), payload(3), &evicted).ok());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, key(2));
  std::vector<std::byte> out(kPayload);
  ASSERT_TRUE(tier.get(key(1), out).ok());
  EXPECT_EQ(out, payload(1));
  EXPECT_EQ(tier.stats().bytes_in, static_cast<int64_t>(3 * kPayload));
}

TEST(HostTierTest, RejectsWrongSizesAndZeroCapacity) {
  HostTier tier(2 * kPayload, kPayload);
  EXPECT_EQ(tier.put(key(1), std::vector<std::byte>(kPayload + 1), nullptr).code(),
            StatusCode::kInvalidArgument);
  HostTier none(0, kPayload);
  EXPECT_EQ(none.put(key(1), payload(1), nullptr).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(none.stats().blocks, 0);
}

TEST(HostTierTest, EraseFreesSpace) {
  HostTier tier(kPayload, kPayload);
  ASSERT_TRUE(tier.put(key(1), payload(1), nullptr).ok());
  tier.erase(key(1));
  tier.erase(key(1));  // no-op
  EXPECT_EQ(tier.stats().used_bytes, 0);
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(key(2), payload(2), &evicted).ok());
  EXPECT_TRUE(evicted.empty());
}

}  // namespace
}  // namespace keel::kv
