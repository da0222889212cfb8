// BlockPool tests: reference counts, the eviction-ordered free list (LRU for cached blocks,
// uncached blocks reused first), eviction of hashes on reuse, and the invariant checker itself.
#include "kv/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::kv {
namespace {

using Ids = std::vector<BlockId>;

BlockHash key(uint64_t i) { return BlockHash{i, ~i}; }

TEST(BlockPoolTest, StartsAllFreeInIdOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_blocks(), 4);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.free_list(), (Ids{0, 1, 2, 3}));
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, TakeFreePopsHeadUntilEmpty) {
  BlockPool pool(3);
  EXPECT_EQ(pool.take_free(), 0);
  EXPECT_EQ(pool.take_free(), 1);
  EXPECT_EQ(pool.take_free(), 2);
  EXPECT_EQ(pool.take_free(), std::nullopt);
  EXPECT_EQ(pool.num_free(), 0);
  for (BlockId b = 0; b < 3; ++b) EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, RefCountsAndRelease) {
  BlockPool pool(2);
  const BlockId b = *pool.take_free();
  pool.acquire(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 1);
  EXPECT_FALSE(pool.is_free(b));
  pool.release(b);
  EXPECT_EQ(pool.ref_count(b), 0);
  EXPECT_TRUE(pool.is_free(b));
  EXPECT_EQ(pool.num_free(), 2);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, UncachedReleasedBlockIsReusedFirst) {
  BlockPool pool(4);
  const BlockId a = *pool.take_free();  // 0
  const BlockId b = *pool.take_free();  // 1
  pool.publish(a, key(1));
  pool.release(a);  // cached → tail
  pool.release(b);  // uncached → head
  EXPECT_EQ(pool.free_list(), (Ids{1, 2, 3, 0}));
  EXPECT_EQ(pool.take_free(), 1);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, CachedBlocksAreEvictedLeastRecentlyUsedFirst) {
  BlockPool pool(3);
  Ids taken;
  for (int i = 0; i < 3; ++i) taken.push_back(*pool.take_free());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(pool.publish(taken[i], key(10 + i)));
  pool.release(taken[1]);
  pool.release(taken[2]);
  pool.release(taken[0]);
  EXPECT_EQ(pool.free_list(), (Ids{1, 2, 0}));
  // Re-using block 2 through the index makes it recently used again.
  pool.acquire(2);
  EXPECT_EQ(pool.free_list(), (Ids{1, 0}));
  pool.release(2);
  EXPECT_EQ(pool.free_list(), (Ids{1, 0, 2}));
  // Taking evicts in that order and forgets the hash.
  EXPECT_EQ(pool.take_free(), 1);
  EXPECT_EQ(pool.lookup(key(11)), std::nullopt);
  EXPECT_EQ(pool.hash_of(1), nullptr);
  EXPECT_EQ(pool.lookup(key(10)), 0);
  EXPECT_EQ(pool.lookup(key(12)), 2);
  EXPECT_EQ(pool.num_cached(), 2);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, OneBlockPerHash) {
  BlockPool pool(2);
  const BlockId a = *pool.take_free();
  const BlockId b = *pool.take_free();
  EXPECT_TRUE(pool.publish(a, key(5)));
  EXPECT_FALSE(pool.publish(b, key(5)));
  EXPECT_EQ(pool.lookup(key(5)), a);
  EXPECT_EQ(pool.hash_of(b), nullptr);
  ASSERT_NE(pool.hash_of(a), nullptr);
  EXPECT_EQ(*pool.hash_of(a), key(5));
  pool.unpublish(a);
  EXPECT_EQ(pool.lookup(key(5)), std::nullopt);
  EXPECT_TRUE(pool.publish(b, key(5)));
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolTest, ClearIndexKeepsFreeBlocksFree) {
  BlockPool pool(3);
  const BlockId a = *pool.take_free();
  pool.publish(a, key(1));
  pool.release(a);
  pool.clear_index();
  EXPECT_EQ(pool.num_cached(), 0);
  EXPECT_EQ(pool.lookup(key(1)), std::nullopt);
  EXPECT_EQ(pool.num_free(), 3);
  EXPECT_TRUE(pool.check_invariants().ok());
}

TEST(BlockPoolDeathTest, ReleasingAFreeBlockAborts) {
  BlockPool pool(1);
  EXPECT_DEATH(pool.release(0), "release of a free block");
}

TEST(BlockPoolDeathTest, OutOfRangeIdAborts) {
  BlockPool pool(1);
  EXPECT_DEATH(pool.acquire(1), "out of range");
}

}  // namespace
}  // namespace keel::kv
