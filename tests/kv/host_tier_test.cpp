// HostTier (T1): round trips, LRU eviction within the byte capacity with evicted payloads handed
// back for demotion, refresh on get/put, counters.
#include "kv/host_tier.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace keel::kv {
namespace {

constexpr size_t kHostPayload = 64;

std::vector<std::byte> host_payload(int seed) {
  std::vector<std::byte> p(kHostPayload);
  for (size_t i = 0; i < p.size(); ++i)
    p[i] = static_cast<std::byte>(seed * 31 + static_cast<int>(i));
  return p;
}

BlockHash host_key(uint64_t i) { return {i, ~i}; }

TEST(HostTierTest, PutGetRoundTripAndCounters) {
  HostTier tier(4 * kHostPayload, kHostPayload);
  ASSERT_TRUE(tier.put(host_key(1), host_payload(1), nullptr).ok());
  std::vector<std::byte> out(kHostPayload);
  ASSERT_TRUE(tier.get(host_key(1), out).ok());
  EXPECT_EQ(out, host_payload(1));
  EXPECT_EQ(tier.get(host_key(2), out).code(), StatusCode::kNotFound);
  const TierStats s = tier.stats();
  EXPECT_EQ(s.blocks, 1);
  EXPECT_EQ(s.used_bytes, static_cast<int64_t>(kHostPayload));
  EXPECT_EQ(s.capacity_bytes, static_cast<int64_t>(4 * kHostPayload));
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.bytes_in, static_cast<int64_t>(kHostPayload));
  EXPECT_EQ(s.bytes_out, static_cast<int64_t>(kHostPayload));
  EXPECT_EQ(tier.name(), "host");
}

TEST(HostTierTest, EvictsLeastRecentlyUsedAndHandsPayloadsBack) {
  HostTier tier(3 * kHostPayload, kHostPayload);
  for (uint64_t i = 1; i <= 3; ++i)
    ASSERT_TRUE(tier.put(host_key(i), host_payload(static_cast<int>(i)), nullptr).ok());
  std::vector<std::byte> out(kHostPayload);
  ASSERT_TRUE(tier.get(host_key(1), out).ok());  // 1 becomes most recent: 2 is now the LRU entry
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(host_key(4), host_payload(4), &evicted).ok());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, host_key(2));
  EXPECT_EQ(evicted[0].payload, host_payload(2));
  EXPECT_FALSE(tier.contains(host_key(2)));
  EXPECT_TRUE(tier.contains(host_key(1)));
  EXPECT_TRUE(tier.contains(host_key(4)));
  EXPECT_EQ(tier.stats().evictions, 1);
  EXPECT_LE(tier.stats().used_bytes, tier.stats().capacity_bytes);
}

TEST(HostTierTest, PutOfAHeldKeyOnlyRefreshes) {
  HostTier tier(2 * kHostPayload, kHostPayload);
  ASSERT_TRUE(tier.put(host_key(1), host_payload(1), nullptr).ok());
  ASSERT_TRUE(tier.put(host_key(2), host_payload(2), nullptr).ok());
  ASSERT_TRUE(tier.put(host_key(1), host_payload(9), nullptr).ok());  // refresh, content unchanged
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(host_key(3), host_payload(3), &evicted).ok());
  ASSERT_EQ(evicted.size(), 1u);
  EXPECT_EQ(evicted[0].key, host_key(2));
  std::vector<std::byte> out(kHostPayload);
  ASSERT_TRUE(tier.get(host_key(1), out).ok());
  EXPECT_EQ(out, host_payload(1));
  EXPECT_EQ(tier.stats().bytes_in, static_cast<int64_t>(3 * kHostPayload));
}

TEST(HostTierTest, RejectsWrongSizesAndZeroCapacity) {
  HostTier tier(2 * kHostPayload, kHostPayload);
  EXPECT_EQ(tier.put(host_key(1), std::vector<std::byte>(kHostPayload + 1), nullptr).code(),
            StatusCode::kInvalidArgument);
  HostTier none(0, kHostPayload);
  EXPECT_EQ(none.put(host_key(1), host_payload(1), nullptr).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(none.stats().blocks, 0);
}

TEST(HostTierTest, EraseFreesSpace) {
  HostTier tier(kHostPayload, kHostPayload);
  ASSERT_TRUE(tier.put(host_key(1), host_payload(1), nullptr).ok());
  tier.erase(host_key(1));
  tier.erase(host_key(1));  // no-op
  EXPECT_EQ(tier.stats().used_bytes, 0);
  std::vector<EvictedBlock> evicted;
  ASSERT_TRUE(tier.put(host_key(2), host_payload(2), &evicted).ok());
  EXPECT_TRUE(evicted.empty());
}

}  // namespace
}  // namespace keel::kv
