// TaskQueue: order, timed closures, closures posting more, stop with and without the due ones.
#include "core/task_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <vector>

namespace keel {
namespace {

using namespace std::chrono_literals;

TEST(TaskQueue, RunsPostedClosuresInOrderOnOneThread) {
  TaskQueue q("test-queue");
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::promise<void> done;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(q.post([&, i] {
      std::lock_guard lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
      if (i == 99) done.set_value();
    }));
  }
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (const auto& t : threads) {
    EXPECT_EQ(t, threads[0]);
    EXPECT_NE(t, std::this_thread::get_id());
  }
}

TEST(TaskQueue, TimedClosuresRunAtTheirTimeAndByTime) {
  TaskQueue q("test-timed");
  std::mutex mu;
  std::vector<int> order;
  std::promise<void> done;
  const auto start = TaskQueue::Clock::now();
  TaskQueue::Clock::time_point late_ran;
  q.post_after(200ms, [&] {
    std::lock_guard lock(mu);
    order.push_back(2);
    late_ran = TaskQueue::Clock::now();
    done.set_value();
  });
  q.post_after(50ms, [&] {
    std::lock_guard lock(mu);
    order.push_back(1);
  });
  q.post([&] {
    std::lock_guard lock(mu);
    order.push_back(0);
  });
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  EXPECT_GE(late_ran - start, 200ms);  // never early
}

TEST(TaskQueue, AClosureMayPostMore) {
  TaskQueue q("test-chain");
  std::atomic<int> n{0};
  std::promise<void> done;
  std::function<void()> step = [&] {
    if (++n == 10) {
      done.set_value();
      return;
    }
    q.post(step);
  };
  q.post(step);
  ASSERT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
  EXPECT_EQ(n.load(), 10);
}

TEST(TaskQueue, StopDropsWhatIsNotDueAndRefusesMore) {
  std::atomic<int> ran{0};
  {
    TaskQueue q("test-stop");
    q.post_after(1h, [&] { ++ran; });
    EXPECT_EQ(q.pending(), 1u);
    q.stop();
    EXPECT_FALSE(q.post([&] { ++ran; }));
    EXPECT_EQ(q.pending(), 0u);
  }
  EXPECT_EQ(ran.load(), 0);
}

TEST(TaskQueue, StopCanRunTheDueOnesFirst) {
  std::atomic<int> ran{0};
  TaskQueue q("test-drain");
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  q.post([open] { open.wait(); });  // holds the worker while the rest are posted
  for (int i = 0; i < 5; ++i) q.post([&] { ++ran; });
  q.post_after(1h, [&] { ran += 100; });
  std::thread stopper([&] { q.stop(/*run_remaining=*/true); });
  std::this_thread::sleep_for(20ms);
  gate.set_value();
  stopper.join();
  EXPECT_EQ(ran.load(), 5);
}

TEST(TaskQueue, AThrowingClosureDoesNotStopTheWorker) {
  TaskQueue q("test-throw");
  std::promise<void> done;
  q.post([] { throw std::runtime_error("boom"); });
  q.post([&] { done.set_value(); });
  EXPECT_EQ(done.get_future().wait_for(10s), std::future_status::ready);
}

}  // namespace
}  // namespace keel
