// KvTiers: demotion writes T1 and through to T2, T1's evictions land in T2, fetch prefers T1 and
// falls back to T2, where() names the tier, and a tier-less KvTiers holds nothing.
#include "kv/kv_tiers.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/file_system.h"
#include "kv/block_file.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"
#include "support/test_support.h"

namespace keel::kv {
namespace {

constexpr size_t kTiersPayload = 128;

std::vector<std::byte> tiers_payload(int seed) {
  return std::vector<std::byte>(kTiersPayload, static_cast<std::byte>(seed));
}

BlockHash tiers_key(uint64_t i) { return {i, i + 100}; }

std::unique_ptr<TierStore> disk(FileSystem* fs, const std::string& dir,
                                int64_t capacity_bytes = 1 << 20) {
  DiskTierConfig c;
  c.dir = dir;
  c.capacity_bytes = capacity_bytes;
  c.identity = {1, 1};
  c.payload_bytes = kTiersPayload;
  auto t = DiskTier::open(fs, c);
  EXPECT_TRUE(t.ok());
  return t.ok() ? std::unique_ptr<TierStore>(std::move(*t)) : nullptr;
}

TEST(KvTiersTest, WriteThroughEvictionDownAndFetchOrder) {
  PosixFileSystem fs;
  KvTiers tiers(std::make_unique<HostTier>(2 * kTiersPayload, kTiersPayload),
                disk(&fs, testing::make_temp_dir("kv_tiers")));
  for (uint64_t i = 1; i <= 3; ++i) tiers.demote(tiers_key(i), tiers_payload(static_cast<int>(i)));
  // T1 holds the 2 most recent; T2 holds all 3 (write-through).
  EXPECT_EQ(tiers.host()->stats().blocks, 2);
  EXPECT_EQ(tiers.disk()->stats().blocks, 3);
  EXPECT_EQ(tiers.where(tiers_key(1)), TierKind::kDisk);
  EXPECT_EQ(tiers.where(tiers_key(3)), TierKind::kHost);
  EXPECT_EQ(tiers.where(tiers_key(9)), TierKind::kNone);
  std::vector<std::byte> out(kTiersPayload);
  ASSERT_TRUE(tiers.fetch(tiers_key(3), out));
  EXPECT_EQ(out, tiers_payload(3));
  EXPECT_EQ(tiers.host()->stats().hits, 1);
  EXPECT_EQ(tiers.disk()->stats().hits, 0);
  ASSERT_TRUE(tiers.fetch(tiers_key(1), out));  // only on disk
  EXPECT_EQ(out, tiers_payload(1));
  EXPECT_EQ(tiers.disk()->stats().hits, 1);
  EXPECT_FALSE(tiers.fetch(tiers_key(9), out));
}

TEST(KvTiersTest, HostOnlyAndNone) {
  KvTiers host(std::make_unique<HostTier>(kTiersPayload, kTiersPayload), nullptr);
  host.demote(tiers_key(1), tiers_payload(1));
  host.demote(tiers_key(2), tiers_payload(2));  // evicts 1: no T2 to take it
  EXPECT_EQ(host.where(tiers_key(1)), TierKind::kNone);
  EXPECT_TRUE(host.contains(tiers_key(2)));
  KvTiers none(nullptr, nullptr);
  EXPECT_TRUE(none.empty());
  none.demote(tiers_key(1), tiers_payload(1));
  EXPECT_FALSE(none.contains(tiers_key(1)));
  std::vector<std::byte> out(kTiersPayload);
  EXPECT_FALSE(none.fetch(tiers_key(1), out));
  EXPECT_TRUE(none.measure().ok());
}

// Cache events for the cluster's index: a block new to T1 or T2 is stored at its medium, T1's
// evictions are removed from "host" (and stored on disk if new there); a refresh logs nothing;
// nothing is logged until recording starts. (T2's own LRU drops are not reported: kv_tiers.h.)
TEST(KvTiersTest, LogsTierGainsAndDropsWithTheirMedium) {
  PosixFileSystem fs;
  // T1 holds 2 blocks; T2 holds 3 block files.
  KvTiers tiers(std::make_unique<HostTier>(2 * kTiersPayload, kTiersPayload),
                disk(&fs, testing::make_temp_dir("kv_tiers_events"),
                     3 * static_cast<int64_t>(kTiersPayload + kBlockFileHeaderBytes)));
  tiers.demote(tiers_key(1), tiers_payload(1));
  EXPECT_TRUE(tiers.take_events().empty()) << "not recording yet";
  tiers.set_record_events(true);
  tiers.demote(tiers_key(1), tiers_payload(1));  // a refresh in both tiers
  EXPECT_TRUE(tiers.take_events().empty());
  tiers.demote(tiers_key(2), tiers_payload(2));
  tiers.demote(tiers_key(3), tiers_payload(3));  // T1 evicts key 1 (already on disk)
  tiers.demote(tiers_key(4),
               tiers_payload(4));  // T1 evicts key 2; T2 evicts key 1 (unreported) for key 4
  using K = CacheEventKind;
  using M = CacheMedium;
  auto ev = [](K kind, uint64_t k, M medium) {
    return CacheEvent{kind, tiers_key(k), kRootHash, {}, medium};
  };
  const std::vector<CacheEvent> want = {
      ev(K::kStored, 2, M::kHost),  ev(K::kStored, 2, M::kDisk), ev(K::kStored, 3, M::kHost),
      ev(K::kRemoved, 1, M::kHost), ev(K::kStored, 3, M::kDisk), ev(K::kStored, 4, M::kHost),
      ev(K::kRemoved, 2, M::kHost), ev(K::kStored, 4, M::kDisk),
  };
  EXPECT_EQ(tiers.take_events(), want);
  EXPECT_TRUE(tiers.take_events().empty());
  EXPECT_EQ(tiers.where(tiers_key(1)), TierKind::kNone);
}

}  // namespace
}  // namespace keel::kv
