// KvCacheManager tests: allocation (all-or-nothing), prefix hits across requests, the
// "never the whole prompt" cap, copy-on-write, salts, the disabled cache, LRU eviction of
// unreferenced cached blocks, hash chaining and the token counters.
#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace keel::kv {
namespace {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<int32_t>;

Tokens iota_tokens(int32_t n, int32_t first = 0) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Ids ids(std::span<const BlockId> s) { return Ids(s.begin(), s.end()); }

const BlockHash kExtra = request_extra_key(BlockHash{42, 0}, "");

KvCacheManager make(int32_t num_blocks, int32_t block_size, bool prefix = true) {
  return KvCacheManager(KvCacheConfig{num_blocks, block_size, prefix});
}

// Allocates and "computes" all of `tokens` for request `id`, publishing its full blocks.
void compute(KvCacheManager& kv, RequestKey id, const Tokens& tokens) {
  ASSERT_TRUE(kv.allocate(id, static_cast<int32_t>(tokens.size())).has_value());
  kv.publish_full_blocks(id, tokens, static_cast<int32_t>(tokens.size()), kExtra);
}

TEST(KvCacheConfigTest, Validate) {
  EXPECT_TRUE((KvCacheConfig{8, 16, true}).validate().ok());
  EXPECT_FALSE((KvCacheConfig{0, 16, true}).validate().ok());
  EXPECT_FALSE((KvCacheConfig{8, 0, true}).validate().ok());
  EXPECT_NE((KvCacheConfig{-1, 16, true}).validate().message().find("num_blocks"),
            std::string::npos);
}

TEST(KvCacheManagerTest, AllocateGrowsTableByBlocks) {
  KvCacheManager kv = make(10, 4);
  EXPECT_EQ(kv.allocate(1, 5)->size(), 2u);
  EXPECT_EQ(kv.allocate(1, 8)->size(), 2u);
  EXPECT_EQ(kv.allocate(1, 9)->size(), 3u);
  EXPECT_EQ(kv.allocate(1, 3)->size(), 3u);  // never shrinks
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_FLOAT_EQ(kv.usage(), 0.3f);
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{0, 1, 2}));
  EXPECT_TRUE(kv.block_table(2).empty());
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 10);
  EXPECT_TRUE(kv.block_table(1).empty());
  EXPECT_TRUE(kv.check_invariants().ok());
}

// Speculative decoding's rollback: the blocks past the kept positions go back to the pool.
TEST(KvCacheManagerTest, TruncateFreesTheBlocksPastTheKeptPositions) {
  KvCacheManager kv = make(8, 4);
  const Tokens tokens = iota_tokens(8);
  ASSERT_TRUE(kv.allocate(1, 14).has_value());  // 4 blocks
  kv.publish_full_blocks(1, tokens, 8, kExtra);
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.truncate(1, 10);  // positions 0..9: 3 blocks
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  EXPECT_EQ(kv.num_free_blocks(), 5);
  kv.truncate(1, 12);  // not longer: nothing changes
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  kv.truncate(1, 8);
  EXPECT_EQ(kv.block_table(1).size(), 2u);
  EXPECT_EQ(kv.lookup_prefix(concat(tokens, {9}), kExtra).num_tokens, 8);  // still published
  kv.truncate(2, 0);                                                       // unknown: a no-op
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, AllocationFailureLeavesStateUnchanged) {
  KvCacheManager kv = make(4, 4);
  compute(kv, 1, iota_tokens(8));  // 2 cached blocks
  kv.free(1);
  ASSERT_TRUE(kv.allocate(2, 4).has_value());  // takes the one uncached free block
  const Ids free_before = kv.pool().free_list();
  const int32_t cached_before = kv.pool().num_cached();

  // 12-token prompt: the cached 8 tokens hit, 4 more tokens need 1 fresh block besides the two
  // (free) hit blocks; asking for 16 tokens needs 2 fresh blocks: too many.
  const Tokens prompt = concat(iota_tokens(8), iota_tokens(4, 100));
  const KvCacheManager::PrefixHit hit = kv.lookup_prefix(prompt, kExtra);
  ASSERT_EQ(hit.num_tokens, 8);
  EXPECT_FALSE(kv.allocate(3, 16, &hit).has_value());
  EXPECT_FALSE(kv.allocate(2, 17).has_value());
  EXPECT_EQ(kv.pool().free_list(), free_before);
  EXPECT_EQ(kv.pool().num_cached(), cached_before);
  EXPECT_TRUE(kv.block_table(3).empty());
  EXPECT_EQ(kv.block_table(2).size(), 1u);
  for (BlockId b : hit.blocks) EXPECT_EQ(kv.pool().ref_count(b), 0);
  EXPECT_TRUE(kv.check_invariants().ok());

  // One fresh block is available: 12 tokens fit.
  ASSERT_TRUE(kv.allocate(3, 12, &hit).has_value());
  EXPECT_EQ(kv.num_free_blocks(), 0);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, PrefixHitSharesBlocksAcrossRequests) {
  KvCacheManager kv = make(16, 4);
  const Tokens a = iota_tokens(10);
  compute(kv, 1, a);  // publishes blocks 0, 1 (tokens 0..7); block 2 is partial
  EXPECT_EQ(kv.pool().num_cached(), 2);

  const Tokens b = concat(iota_tokens(8), Tokens{100, 101, 102});
  const KvCacheManager::PrefixHit hit = kv.find_prefix(b, kExtra);
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.blocks, (Ids{kv.block_table(1)[0], kv.block_table(1)[1]}));
  const auto table = kv.allocate(2, 11, &hit);
  ASSERT_TRUE(table.has_value());
  ASSERT_EQ(table->size(), 3u);
  EXPECT_EQ((*table)[0], kv.block_table(1)[0]);
  EXPECT_EQ((*table)[1], kv.block_table(1)[1]);
  EXPECT_NE((*table)[2], kv.block_table(1)[2]);
  EXPECT_EQ(kv.pool().ref_count((*table)[0]), 2);
  EXPECT_EQ(kv.pool().ref_count((*table)[2]), 1);
  EXPECT_EQ(kv.num_free_blocks(), 16 - 4);

  // A prompt diverging inside the second block hits the first block only.
  const Tokens c = concat(iota_tokens(5), Tokens{77, 78, 79, 80});
  EXPECT_EQ(kv.find_prefix(c, kExtra).num_tokens, 4);
  // Counters are in tokens: 11 + 9 queried, 8 + 4 hit.
  EXPECT_EQ(kv.prefix_queries_tokens(), 20);
  EXPECT_EQ(kv.prefix_hits_tokens(), 12);
  // lookup_prefix does not count.
  EXPECT_EQ(kv.lookup_prefix(c, kExtra).num_tokens, 4);
  EXPECT_EQ(kv.prefix_queries_tokens(), 20);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, HitNeverCoversTheWholePrompt) {
  KvCacheManager kv = make(16, 4);
  compute(kv, 1, iota_tokens(8));
  // Fully cached 8-token prompt: 7 tokens, both blocks (the second is partially used).
  const auto full = kv.lookup_prefix(iota_tokens(8), kExtra);
  EXPECT_EQ(full.num_tokens, 7);
  EXPECT_EQ(full.blocks.size(), 2u);
  const auto one_block = kv.lookup_prefix(iota_tokens(4), kExtra);
  EXPECT_EQ(one_block.num_tokens, 3);
  EXPECT_EQ(one_block.blocks.size(), 1u);
  EXPECT_EQ(kv.lookup_prefix(iota_tokens(1), kExtra).num_tokens, 0);
  EXPECT_EQ(kv.lookup_prefix(Tokens{}, kExtra).num_tokens, 0);
  // Longer prompt: all 8 cached tokens count, no cap needed.
  EXPECT_EQ(kv.lookup_prefix(iota_tokens(9), kExtra).num_tokens, 8);

  // Block size 1: the cap drops the last block instead of using part of it.
  KvCacheManager kv1 = make(16, 1);
  compute(kv1, 1, iota_tokens(5));
  const auto hit = kv1.lookup_prefix(iota_tokens(5), kExtra);
  EXPECT_EQ(hit.num_tokens, 4);
  EXPECT_EQ(hit.blocks.size(), 4u);
}

TEST(KvCacheManagerTest, CopyOnWriteOfASharedPartiallyReusedBlock) {
  KvCacheManager kv = make(8, 4);
  const Tokens prompt = iota_tokens(8);
  compute(kv, 1, prompt);  // request 1 keeps its blocks
  const Ids a = ids(kv.block_table(1));

  const auto hit = kv.find_prefix(prompt, kExtra);
  ASSERT_EQ(hit.num_tokens, 7);
  ASSERT_TRUE(kv.allocate(2, 8, &hit).has_value());
  EXPECT_EQ(ids(kv.block_table(2)), a);
  EXPECT_EQ(kv.pool().ref_count(a[1]), 2);

  // Position 7 (row 3 of the second block) is about to be recomputed by request 2.
  const auto w = kv.make_writable(2, 7);
  EXPECT_FALSE(w.no_room);
  ASSERT_TRUE(w.copy.has_value());
  EXPECT_EQ(w.copy->first, a[1]);
  const BlockId dst = w.copy->second;
  EXPECT_NE(dst, a[1]);
  EXPECT_EQ(ids(kv.block_table(2)), (Ids{a[0], dst}));
  EXPECT_EQ(ids(kv.block_table(1)), a);  // untouched
  EXPECT_EQ(kv.pool().ref_count(a[1]), 1);
  EXPECT_EQ(kv.pool().ref_count(dst), 1);
  EXPECT_EQ(kv.pool().ref_count(a[0]), 2);
  EXPECT_EQ(kv.pool().lookup(hit.hashes[1]), a[1]);  // still findable
  // The copy is now private: writing it again needs nothing.
  EXPECT_FALSE(kv.make_writable(2, 7).copy.has_value());

  // After computing position 7, request 2's block duplicates a[1]'s key and stays private.
  kv.publish_full_blocks(2, prompt, 8, kExtra);
  EXPECT_EQ(kv.pool().hash_of(dst), nullptr);
  EXPECT_EQ(kv.pool().lookup(hit.hashes[1]), a[1]);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, SoleOwnerUnpublishesInsteadOfCopying) {
  KvCacheManager kv = make(8, 4);
  const Tokens prompt = iota_tokens(8);
  compute(kv, 1, prompt);
  const Ids a = ids(kv.block_table(1));
  kv.free(1);  // blocks cached, unreferenced

  const auto hit = kv.find_prefix(prompt, kExtra);
  ASSERT_EQ(hit.num_tokens, 7);
  ASSERT_TRUE(kv.allocate(2, 8, &hit).has_value());
  EXPECT_EQ(kv.pool().ref_count(a[1]), 1);
  const auto w = kv.make_writable(2, 7);
  EXPECT_FALSE(w.no_room);
  EXPECT_FALSE(w.copy.has_value());
  EXPECT_EQ(kv.pool().hash_of(a[1]), nullptr);  // no longer claims contents being rewritten
  EXPECT_EQ(kv.lookup_prefix(iota_tokens(9), kExtra).num_tokens, 4);
  EXPECT_NE(kv.pool().hash_of(a[0]), nullptr);
  // Once computed it is published again, under the same key.
  kv.publish_full_blocks(2, prompt, 8, kExtra);
  EXPECT_EQ(kv.pool().lookup(hit.hashes[1]), a[1]);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, CopyOnWriteWithoutRoomChangesNothing) {
  KvCacheManager kv = make(3, 4);
  const Tokens prompt = iota_tokens(8);
  compute(kv, 1, prompt);
  const auto hit = kv.find_prefix(prompt, kExtra);
  ASSERT_TRUE(kv.allocate(2, 8, &hit).has_value());
  ASSERT_TRUE(kv.allocate(3, 1).has_value());  // the last free block
  const Ids before = ids(kv.block_table(2));
  const auto w = kv.make_writable(2, 7);
  EXPECT_TRUE(w.no_room);
  EXPECT_FALSE(w.copy.has_value());
  EXPECT_EQ(ids(kv.block_table(2)), before);
  EXPECT_EQ(kv.pool().ref_count(before[1]), 2);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, PrivateBlocksNeverCopy) {
  KvCacheManager kv = make(4, 4);
  ASSERT_TRUE(kv.allocate(1, 6).has_value());
  for (int32_t pos = 0; pos < 6; ++pos) {
    const auto w = kv.make_writable(1, pos);
    EXPECT_FALSE(w.no_room);
    EXPECT_FALSE(w.copy.has_value());
  }
  EXPECT_EQ(kv.num_free_blocks(), 2);
}

TEST(KvCacheManagerTest, SaltsIsolateTenants) {
  KvCacheManager kv = make(16, 4);
  const BlockHash model{7, 7};
  const BlockHash salt_a = request_extra_key(model, "tenant-a");
  const BlockHash salt_b = request_extra_key(model, "tenant-b");
  const BlockHash no_salt = request_extra_key(model, "");
  const Tokens prompt = iota_tokens(12);
  ASSERT_TRUE(kv.allocate(1, 12).has_value());
  kv.publish_full_blocks(1, prompt, 12, salt_a);
  EXPECT_EQ(kv.find_prefix(prompt, salt_a).num_tokens, 11);
  EXPECT_EQ(kv.find_prefix(prompt, salt_b).num_tokens, 0);
  EXPECT_EQ(kv.find_prefix(prompt, no_salt).num_tokens, 0);
  EXPECT_EQ(kv.find_prefix(prompt, request_extra_key(BlockHash{8, 7}, "tenant-a")).num_tokens, 0);
}

TEST(KvCacheManagerTest, DisabledCacheNeverHitsNorCounts) {
  KvCacheManager kv = make(16, 4, /*prefix=*/false);
  EXPECT_FALSE(kv.prefix_cache_enabled());
  const Tokens prompt = iota_tokens(12);
  compute(kv, 1, prompt);
  EXPECT_EQ(kv.pool().num_cached(), 0);
  kv.free(1);
  const auto hit = kv.find_prefix(prompt, kExtra);
  EXPECT_EQ(hit.num_tokens, 0);
  EXPECT_TRUE(hit.blocks.empty());
  EXPECT_EQ(kv.prefix_queries_tokens(), 0);
  EXPECT_EQ(kv.prefix_hits_tokens(), 0);
  // Freed blocks are uncached: reused head first, in the order they were released.
  EXPECT_EQ(kv.pool().free_list().size(), 16u);
}

TEST(KvCacheManagerTest, UnreferencedCachedBlocksAreEvictedLru) {
  KvCacheManager kv = make(4, 2);
  const Tokens a = iota_tokens(4, 0);
  const Tokens b = iota_tokens(4, 10);
  compute(kv, 1, a);
  compute(kv, 2, b);
  const Ids ta = ids(kv.block_table(1));
  const Ids tb = ids(kv.block_table(2));
  kv.free(1);  // released last block first: the first block is the more recently used
  kv.free(2);
  EXPECT_EQ(kv.pool().free_list(), (Ids{ta[1], ta[0], tb[1], tb[0]}));
  EXPECT_EQ(kv.lookup_prefix(concat(a, {99}), kExtra).num_tokens, 4);

  // New uncached requests evict A's tail block first, then its head block, then B's.
  ASSERT_TRUE(kv.allocate(3, 2).has_value());
  EXPECT_EQ(kv.block_table(3)[0], ta[1]);
  EXPECT_EQ(kv.lookup_prefix(concat(a, {99}), kExtra).num_tokens, 2);
  ASSERT_TRUE(kv.allocate(4, 2).has_value());
  EXPECT_EQ(kv.block_table(4)[0], ta[0]);
  EXPECT_EQ(kv.lookup_prefix(concat(a, {99}), kExtra).num_tokens, 0);
  EXPECT_EQ(kv.lookup_prefix(concat(b, {99}), kExtra).num_tokens, 4);

  kv.free(3);  // its hash was evicted when it was taken: back at the head, reused first
  EXPECT_EQ(kv.pool().free_list(), (Ids{ta[1], tb[1], tb[0]}));
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, ChainingSeparatesSameBlockAfterDifferentPrefixes) {
  KvCacheManager kv = make(16, 4);
  const Tokens shared_tail = {50, 51, 52, 53};
  compute(kv, 1, concat(iota_tokens(4, 0), shared_tail));
  // Same second block after a different first block: no hit at all (the chain starts at block 0).
  EXPECT_EQ(
      kv.lookup_prefix(concat(concat(iota_tokens(4, 20), shared_tail), {1}), kExtra).num_tokens, 0);
  // Same first block, different second: one block.
  EXPECT_EQ(kv.lookup_prefix(concat(iota_tokens(4, 0), Tokens{1, 2, 3, 4, 5}), kExtra).num_tokens,
            4);
}

TEST(KvCacheManagerTest, DuplicateComputedContentStaysPrivate) {
  KvCacheManager kv = make(8, 4);
  const Tokens prompt = iota_tokens(8);
  ASSERT_TRUE(kv.allocate(1, 8).has_value());
  ASSERT_TRUE(kv.allocate(2, 8).has_value());  // both computed it without a hit
  kv.publish_full_blocks(1, prompt, 8, kExtra);
  kv.publish_full_blocks(2, prompt, 8, kExtra);
  for (BlockId b : kv.block_table(1)) EXPECT_NE(kv.pool().hash_of(b), nullptr);
  for (BlockId b : kv.block_table(2)) EXPECT_EQ(kv.pool().hash_of(b), nullptr);
  const Ids t2 = ids(kv.block_table(2));
  kv.free(2);  // private blocks are reused first
  EXPECT_EQ(kv.pool().free_list()[0], t2[0]);
  EXPECT_EQ(kv.pool().free_list()[1], t2[1]);
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, PublishIsIncrementalAndOnlyFullComputedBlocks) {
  KvCacheManager kv = make(8, 4);
  const Tokens prompt = iota_tokens(11);
  ASSERT_TRUE(kv.allocate(1, 11).has_value());
  kv.publish_full_blocks(1, prompt, 3, kExtra);
  EXPECT_EQ(kv.pool().num_cached(), 0);
  kv.publish_full_blocks(1, prompt, 5, kExtra);
  EXPECT_EQ(kv.pool().num_cached(), 1);
  kv.publish_full_blocks(1, prompt, 11, kExtra);
  EXPECT_EQ(kv.pool().num_cached(), 2);
  kv.publish_full_blocks(1, prompt, 11, kExtra);
  EXPECT_EQ(kv.pool().num_cached(), 2);
  EXPECT_EQ(kv.lookup_prefix(concat(iota_tokens(8), {0}), kExtra).num_tokens, 8);
}

TEST(KvCacheManagerTest, ResetPrefixCacheForgetsEverything) {
  KvCacheManager kv = make(8, 4);
  compute(kv, 1, iota_tokens(8));
  compute(kv, 2, iota_tokens(8, 30));
  kv.free(2);
  kv.reset_prefix_cache();
  EXPECT_EQ(kv.pool().num_cached(), 0);
  EXPECT_EQ(kv.lookup_prefix(iota_tokens(9), kExtra).num_tokens, 0);
  EXPECT_EQ(kv.lookup_prefix(iota_tokens(9, 30), kExtra).num_tokens, 0);
  EXPECT_EQ(kv.block_table(1).size(), 2u);  // in use: untouched
  EXPECT_TRUE(kv.check_invariants().ok());
}

TEST(KvCacheManagerTest, ReleaseBlockLeavesAHoleAndFreesTheBlock) {
  KvCacheManager kv = make(8, 4);
  ASSERT_TRUE(kv.allocate(1, 14).has_value());  // 4 blocks
  EXPECT_EQ(kv.num_free_blocks(), 4);
  kv.release_block(1, 1);
  kv.release_block(1, 1);  // twice: a no-op
  EXPECT_EQ(kv.num_free_blocks(), 5);
  EXPECT_EQ(kv.num_held_blocks(1), 3);
  EXPECT_EQ(ids(kv.block_table(1)), (Ids{0, kNoBlock, 2, 3}));
  EXPECT_FLOAT_EQ(kv.usage(), 3.0f / 8.0f);
  // Growing keeps the hole and its page numbering; publication stops at it.
  ASSERT_TRUE(kv.allocate(1, 17).has_value());
  EXPECT_EQ(kv.block_table(1).size(), 5u);
  kv.publish_full_blocks(1, iota_tokens(17), 16, kExtra);
  EXPECT_EQ(kv.pool().num_cached(), 1);  // page 0 only
  EXPECT_TRUE(kv.check_invariants().ok());
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 8);
  EXPECT_TRUE(kv.check_invariants().ok());
  kv.release_block(7, 0);  // unknown: a no-op
}

TEST(KvCacheManagerDeathTest, ReleasingTheLastPageIsRefused) {
  KvCacheManager kv = make(8, 4);
  ASSERT_TRUE(kv.allocate(1, 8).has_value());
  EXPECT_DEATH(kv.release_block(1, 1), "below the last");
}

}  // namespace
}  // namespace keel::kv
