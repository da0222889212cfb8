// The tiers under concurrent use, as the engine thread and the tier transfer thread use them:
// several threads put, get, test, erase and read the counters of one HostTier, one DiskTier (real
// files) and a KvTiers of both. Payloads are a function of their key, so every successful get()
// is checked; at the end the byte accounting is exact and within capacity. Meant for the TSan
// build (label tsan-core), cheap enough for the ASan one.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "core/file_system.h"
#include "kv/block_file.h"
#include "kv/disk_tier.h"
#include "kv/host_tier.h"
#include "kv/kv_tiers.h"
#include "support/test_support.h"

namespace keel::kv {
namespace {

constexpr size_t kConcurrentPayload = 256;
constexpr uint64_t kKeys = 24;

BlockHash concurrent_key(uint64_t i) { return {i + 1, 0x5eed}; }

std::vector<std::byte> payload_of(uint64_t i) {
  std::vector<std::byte> p(kConcurrentPayload);
  for (size_t b = 0; b < p.size(); ++b) p[b] = static_cast<std::byte>(i * 131 + b);
  return p;
}

// `threads` threads × `ops` random operations on `store`; returns the number of verified hits.
int64_t hammer(TierStore* store, int threads, int ops) {
  std::atomic<int64_t> hits{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) * 7919 + 1);
      std::vector<std::byte> out(kConcurrentPayload);
      std::vector<EvictedBlock> evicted;
      for (int i = 0; i < ops; ++i) {
        const uint64_t k = rng() % kKeys;
        switch (rng() % 6) {
          case 0:
          case 1:
            evicted.clear();
            (void)store->put(concurrent_key(k), payload_of(k), &evicted);
            for (const EvictedBlock& e : evicted) {
              EXPECT_EQ(e.payload, payload_of(e.key.lo - 1));
            }
            break;
          case 2:
          case 3:
            if (store->get(concurrent_key(k), out).ok()) {
              EXPECT_EQ(out, payload_of(k)) << "key " << k;
              hits.fetch_add(1);
            }
            break;
          case 4:
            if (rng() % 4 == 0) store->erase(concurrent_key(k));
            (void)store->contains(concurrent_key(k));
            break;
          default: {
            const TierStats s = store->stats();
            EXPECT_LE(s.used_bytes, s.capacity_bytes);
            EXPECT_GE(s.blocks, 0);
          }
        }
      }
    });
  }
  for (std::thread& th : pool) th.join();
  return hits.load();
}

TEST(TierConcurrencyTest, HostTierUnderFourThreads) {
  HostTier tier(8 * kConcurrentPayload,
                kConcurrentPayload);  // a third of the keys fit: constant eviction
  EXPECT_GT(hammer(&tier, 4, 4000), 0);
  const TierStats s = tier.stats();
  EXPECT_EQ(s.used_bytes, s.blocks * static_cast<int64_t>(kConcurrentPayload));
  EXPECT_LE(s.used_bytes, s.capacity_bytes);
}

TEST(TierConcurrencyTest, DiskTierUnderFourThreads) {
  PosixFileSystem fs;
  DiskTierConfig c;
  c.dir = testing::make_temp_dir("tier_concurrency");
  c.identity = {1, 2};
  c.payload_bytes = kConcurrentPayload;
  const int64_t file_bytes = static_cast<int64_t>(kBlockFileHeaderBytes + kConcurrentPayload);
  c.capacity_bytes = 8 * file_bytes;
  auto tier = DiskTier::open(&fs, c);
  ASSERT_TRUE(tier.ok()) << tier.error().to_string();
  EXPECT_GT(hammer(tier->get(), 4, 600), 0);
  const TierStats s = (*tier)->stats();
  EXPECT_EQ(s.used_bytes, s.blocks * file_bytes);
  EXPECT_LE(s.used_bytes, s.capacity_bytes);
  EXPECT_EQ(s.corrupt, 0);
  // What the index holds is what a restart finds.
  tier->reset();
  auto reopened = DiskTier::open(&fs, c);
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ((*reopened)->stats().blocks, s.blocks);
  EXPECT_EQ((*reopened)->stats().corrupt, 0);
}

TEST(TierConcurrencyTest, KvTiersDemoteAndFetchFromThreeThreads) {
  PosixFileSystem fs;
  DiskTierConfig c;
  c.dir = testing::make_temp_dir("tier_concurrency_both");
  c.identity = {3, 4};
  c.payload_bytes = kConcurrentPayload;
  c.capacity_bytes = 12 * static_cast<int64_t>(kBlockFileHeaderBytes + kConcurrentPayload);
  auto disk = DiskTier::open(&fs, c);
  ASSERT_TRUE(disk.ok());
  KvTiers tiers(std::make_unique<HostTier>(4 * kConcurrentPayload, kConcurrentPayload),
                std::move(disk).value());
  std::atomic<int64_t> fetched{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 99);
      std::vector<std::byte> out(kConcurrentPayload);
      for (int i = 0; i < 400; ++i) {
        const uint64_t k = rng() % kKeys;
        if (rng() % 2 == 0) {
          tiers.demote(concurrent_key(k), payload_of(k));
        } else if (tiers.fetch(concurrent_key(k), out)) {
          EXPECT_EQ(out, payload_of(k)) << "key " << k;
          fetched.fetch_add(1);
        }
        (void)tiers.where(concurrent_key(k));
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_GT(fetched.load(), 0);
  EXPECT_EQ(tiers.disk()->stats().corrupt, 0);
}

}  // namespace
}  // namespace keel::kv
