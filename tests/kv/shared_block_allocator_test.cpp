// SharedBlockAllocator tests: all-or-nothing allocation, reference counts, the invariant checker,
// and a race of several threads allocating, sharing and releasing at once (run under
// ThreadSanitizer by `make test`): no block is lost or handed out twice and the counts reconcile.
#include "kv/shared_block_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace keel::kv {
namespace {

using Ids = std::vector<BlockId>;

TEST(SharedBlockAllocatorTest, AllocatesInIdOrderAllOrNothing) {
  SharedBlockAllocator a(4);
  Ids got;
  ASSERT_TRUE(a.allocate(3, &got));
  EXPECT_EQ(got, (Ids{0, 1, 2}));
  EXPECT_FALSE(a.allocate(2, &got));  // one free: nothing taken
  EXPECT_EQ(got.size(), 3u);
  EXPECT_EQ(a.num_free(), 1);
  EXPECT_EQ(a.num_allocated(), 3);
  EXPECT_TRUE(a.check_invariants().ok());
}

TEST(SharedBlockAllocatorTest, SharedBlockFreedWithLastReference) {
  SharedBlockAllocator a(2);
  Ids got;
  ASSERT_TRUE(a.allocate(1, &got));
  a.acquire(got[0]);
  EXPECT_EQ(a.ref_count(got[0]), 2);
  a.release(got);
  EXPECT_EQ(a.num_free(), 1);
  a.release(got);
  EXPECT_EQ(a.ref_count(got[0]), 0);
  EXPECT_EQ(a.num_free(), 2);
  // A released block is reused first.
  Ids again;
  ASSERT_TRUE(a.allocate(1, &again));
  EXPECT_EQ(again[0], got[0]);
  EXPECT_TRUE(a.check_invariants().ok());
}

TEST(SharedBlockAllocatorDeathTest, ReleaseOfFreeBlockAborts) {
  SharedBlockAllocator a(2);
  const Ids one{1};
  EXPECT_DEATH(a.release(one), "release of a free block");
}

// Threads race on a small pool: each allocates 1-4 blocks, marks itself the owner of each (a
// block handed out twice finds an owner already there), sometimes shares a block with a second
// reference, then releases everything. Afterwards every block is free and the counts reconcile.
TEST(SharedBlockAllocatorTest, RaceLosesNoBlockAndHandsNoneOutTwice) {
  constexpr int32_t kBlocks = 24;
  constexpr int kThreads = 4;
  constexpr int kRounds = 2000;
  SharedBlockAllocator a(kBlocks);
  std::vector<std::atomic<int>> owner(kBlocks);
  for (auto& o : owner) o.store(-1);
  std::atomic<int64_t> double_handouts{0};
  std::atomic<int64_t> allocated{0};
  std::atomic<int64_t> released{0};
  std::atomic<int64_t> refused{0};
  auto worker = [&](int tid) {
    std::mt19937 rng(1234 + tid);
    for (int round = 0; round < kRounds; ++round) {
      const int32_t n = 1 + static_cast<int32_t>(rng() % 4);
      Ids mine;
      if (!a.allocate(n, &mine)) {
        refused.fetch_add(1);
        continue;
      }
      if (static_cast<int32_t>(mine.size()) != n) double_handouts.fetch_add(1000);
      allocated.fetch_add(n);
      for (const BlockId b : mine) {
        int expected = -1;
        if (!owner[b].compare_exchange_strong(expected, tid)) double_handouts.fetch_add(1);
      }
      const bool share = rng() % 3 == 0;
      if (share) a.acquire(mine[0]);  // a second holder (the hand-off pattern)
      for (const BlockId b : mine) {
        int expected = tid;
        if (!owner[b].compare_exchange_strong(expected, -1)) double_handouts.fetch_add(1);
      }
      if (share) a.release(std::span<const BlockId>(mine.data(), 1));
      a.release(mine);
      released.fetch_add(n);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& t : threads) t.join();

  EXPECT_EQ(double_handouts.load(), 0);
  EXPECT_GT(allocated.load(), 0);
  EXPECT_EQ(allocated.load(), released.load());
  EXPECT_EQ(a.num_free(), kBlocks);  // no block lost
  EXPECT_EQ(a.num_allocated(), 0);
  const Status s = a.check_invariants();
  EXPECT_TRUE(s.ok()) << s.message();
  Ids all;
  ASSERT_TRUE(a.allocate(kBlocks, &all));  // every id comes back exactly once
  std::sort(all.begin(), all.end());
  for (BlockId b = 0; b < kBlocks; ++b) EXPECT_EQ(all[b], b);
}

}  // namespace
}  // namespace keel::kv
