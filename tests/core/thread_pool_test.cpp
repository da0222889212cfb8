#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace keel {
namespace {

TEST(ThreadPoolTest, EveryThreadRunsEachJobOnce) {
  for (int n : {1, 2, 3, 4}) {
    ThreadPool pool(n);
    EXPECT_EQ(pool.num_threads(), n);
    for (int job = 0; job < 200; ++job) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.run([&](int idx, int nth) {
        EXPECT_EQ(nth, n);
        hits[static_cast<size_t>(idx)].fetch_add(1);
      });
      for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, ParallelForCoversRangeExactlyOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 5, 16, 17, 1000}) {
    for (int64_t grain : {1, 4, 16}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
        EXPECT_EQ(b % grain, 0);
        for (int64_t i = b; i < e; ++i) seen[static_cast<size_t>(i)].fetch_add(1);
      });
      for (auto& s : seen) ASSERT_EQ(s.load(), 1);
    }
  }
}

TEST(ThreadPoolTest, JobsAfterIdleSleepStillRun) {
  ThreadPool pool(2);
  std::atomic<int> total{0};
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // workers fall asleep
    pool.run([&](int, int) { total.fetch_add(1); });
  }
  EXPECT_EQ(total.load(), 6);
}

// Plain (non-atomic) data crosses the pool: the owner writes inputs before run(), each worker
// writes its own output slot, the owner reads them after run() — correct only if run() orders
// those accesses (what ThreadSanitizer checks in the tsan-core build).
TEST(ThreadPoolTest, RunOrdersPlainDataBetweenOwnerAndWorkers) {
  ThreadPool pool(4);
  std::vector<int64_t> input(4096);
  std::vector<int64_t> partial(4);
  for (int job = 0; job < 300; ++job) {
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<int64_t>(i) * job;
    pool.run([&](int idx, int nth) {
      int64_t sum = 0;
      for (size_t i = static_cast<size_t>(idx); i < input.size(); i += static_cast<size_t>(nth))
        sum += input[i];
      partial[static_cast<size_t>(idx)] = sum;
    });
    int64_t total = 0;
    for (int64_t p : partial) total += p;
    ASSERT_EQ(total, int64_t{4095} * 4096 / 2 * job);
    if (job % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // sleepers
  }
}

}  // namespace
}  // namespace keel
