// CacheEventLog through the KvCacheManager: published blocks log `stored` with their chained
// parent and tokens (hashes equal hash_block's chain), evictions and un-publications log
// `removed`, resets log `cleared`; blocks that stay private and managers that do not record log
// nothing.
#include "kv/cache_event_log.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

namespace keel::kv {
namespace {

using Tokens = std::vector<int32_t>;

const BlockHash kLogExtra = request_extra_key(BlockHash{7, 0}, "");

Tokens log_iota_tokens(int32_t n, int32_t first) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

KvCacheManager recording(int32_t num_blocks, int32_t block_size) {
  KvCacheManager kv(KvCacheConfig{num_blocks, block_size, true});
  kv.set_record_cache_events(true);
  return kv;
}

void log_compute(KvCacheManager& kv, RequestKey id, const Tokens& tokens) {
  ASSERT_TRUE(kv.allocate(id, static_cast<int32_t>(tokens.size())).has_value());
  kv.publish_full_blocks(id, tokens, static_cast<int32_t>(tokens.size()), kLogExtra);
}

TEST(CacheEventLogTest, PublishLogsStoredBlocksWithTheirChain) {
  KvCacheManager kv = recording(8, 4);
  const Tokens t = log_iota_tokens(10, 100);  // two full blocks and a partial one
  log_compute(kv, 1, t);
  const std::vector<CacheEvent> ev = kv.take_cache_events();
  ASSERT_EQ(ev.size(), 2u);
  const BlockHash h0 = hash_block(kRootHash, std::span(t).subspan(0, 4), kLogExtra);
  const BlockHash h1 = hash_block(h0, std::span(t).subspan(4, 4), kLogExtra);
  EXPECT_EQ(ev[0], (CacheEvent{CacheEventKind::kStored, h0, kRootHash, {100, 101, 102, 103}}));
  EXPECT_EQ(ev[1], (CacheEvent{CacheEventKind::kStored, h1, h0, {104, 105, 106, 107}}));
  EXPECT_TRUE(kv.take_cache_events().empty());  // drained
}

TEST(CacheEventLogTest, IncrementalPublicationLogsEachBlockOnce) {
  KvCacheManager kv = recording(8, 4);
  const Tokens t = log_iota_tokens(12, 0);
  ASSERT_TRUE(kv.allocate(1, 12).has_value());
  kv.publish_full_blocks(1, t, 5, kLogExtra);
  EXPECT_EQ(kv.take_cache_events().size(), 1u);
  kv.publish_full_blocks(1, t, 12, kLogExtra);
  const std::vector<CacheEvent> ev = kv.take_cache_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].tokens, (Tokens{4, 5, 6, 7}));
  EXPECT_EQ(ev[1].parent, ev[0].hash);
}

TEST(CacheEventLogTest, PrivateDuplicatesAndPrefixHitsLogNothing) {
  KvCacheManager kv = recording(16, 4);
  const Tokens t = log_iota_tokens(9, 0);
  log_compute(kv, 1, t);
  (void)kv.take_cache_events();
  log_compute(kv, 2, t);  // computed again without a hit: its blocks stay private
  EXPECT_TRUE(kv.take_cache_events().empty());
  const KvCacheManager::PrefixHit hit = kv.find_prefix(t, kLogExtra);
  ASSERT_EQ(hit.blocks.size(), 2u);
  ASSERT_TRUE(kv.allocate(3, 9, &hit).has_value());
  kv.publish_full_blocks(3, t, 9, kLogExtra);
  EXPECT_TRUE(kv.take_cache_events().empty());
}

TEST(CacheEventLogTest, EvictionLogsRemoved) {
  KvCacheManager kv = recording(2, 4);
  const Tokens t = log_iota_tokens(8, 0);
  log_compute(kv, 1, t);
  const std::vector<CacheEvent> stored = kv.take_cache_events();
  ASSERT_EQ(stored.size(), 2u);
  kv.free(1);  // cached, free: evicted last block first
  EXPECT_TRUE(kv.take_cache_events().empty());
  ASSERT_TRUE(kv.allocate(2, 8).has_value());  // takes both cached blocks
  const std::vector<CacheEvent> ev = kv.take_cache_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, CacheEventKind::kRemoved);
  EXPECT_EQ(ev[1].kind, CacheEventKind::kRemoved);
  // free() released the last block first, so the first block sits at the tail: evicted last.
  EXPECT_EQ(ev[0].hash, stored[1].hash);
  EXPECT_EQ(ev[1].hash, stored[0].hash);
}

TEST(CacheEventLogTest, MakeWritableOfAnOwnedBlockLogsRemoved) {
  KvCacheManager kv = recording(4, 4);
  const Tokens t = log_iota_tokens(4, 0);
  log_compute(kv, 1, t);
  const std::vector<CacheEvent> stored = kv.take_cache_events();
  ASSERT_EQ(stored.size(), 1u);
  (void)kv.make_writable(1, 3);
  const std::vector<CacheEvent> ev = kv.take_cache_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0], (CacheEvent{CacheEventKind::kRemoved, stored[0].hash, {}, {}}));
}

TEST(CacheEventLogTest, ResetLogsCleared) {
  KvCacheManager kv = recording(4, 4);
  log_compute(kv, 1, log_iota_tokens(4, 0));
  (void)kv.take_cache_events();
  kv.reset_prefix_cache();
  const std::vector<CacheEvent> ev = kv.take_cache_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, CacheEventKind::kCleared);
}

TEST(CacheEventLogTest, NotRecordingLogsNothingAndSurvivesAMove) {
  KvCacheManager off(KvCacheConfig{4, 4, true});
  log_compute(off, 1, log_iota_tokens(8, 0));
  EXPECT_TRUE(off.take_cache_events().empty());
  KvCacheManager on = recording(4, 4);
  KvCacheManager moved = std::move(on);
  log_compute(moved, 1, log_iota_tokens(8, 0));
  EXPECT_EQ(moved.take_cache_events().size(), 2u);
  moved.set_record_cache_events(false);
  moved.reset_prefix_cache();
  EXPECT_TRUE(moved.take_cache_events().empty());
}

}  // namespace
}  // namespace keel::kv
