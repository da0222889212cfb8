// KeepaliveLoop: a refresh that fails transiently keeps the lease (the store may be restarting);
// NotFound ends it; with `expire_after` (fencing) a lease whose keepalives go unconfirmed that
// long is taken as lost even though no answer said so, and stays lost; confirmed keepalives keep
// it alive well past `expire_after`. Bounded waits only (no timing assertions).
#include "membership/keepalive_loop.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "support/test_support.h"

namespace keel::membership {
namespace {

using namespace std::chrono_literals;
using keel::testing::eventually;

TEST(KeepaliveLoopTest, TransientFailuresKeepTheLeaseWithoutFencing) {
  std::atomic<int> calls{0};
  KeepaliveLoop loop(10ms, [&] {
    ++calls;
    return Status::unavailable("store down");
  });
  ASSERT_TRUE(eventually([&] { return calls.load() >= 10; }, 5s));
  EXPECT_TRUE(loop.alive());
}

TEST(KeepaliveLoopTest, NotFoundEndsTheLease) {
  KeepaliveLoop loop(10ms, [] { return Status::not_found("lease 7 expired"); });
  EXPECT_TRUE(eventually([&] { return !loop.alive(); }, 5s));
}

TEST(KeepaliveLoopTest, UnconfirmedKeepalivesPastTheDeadlineFenceTheLease) {
  std::atomic<bool> reachable{true};
  std::atomic<int> calls{0};
  KeepaliveLoop loop(
      20ms,
      [&] {
        ++calls;
        return reachable ? Status() : Status::unavailable("store unreachable");
      },
      200ms);
  // Confirmed keepalives: alive for many deadlines.
  ASSERT_TRUE(eventually([&] { return calls.load() >= 40; }, 10s));
  EXPECT_TRUE(loop.alive()) << "confirmed keepalives keep the lease";
  reachable = false;
  EXPECT_TRUE(eventually([&] { return !loop.alive(); }, 5s)) << "fenced after the deadline";
  reachable = true;  // the store answers again: too late, the lease may have been given away
  std::this_thread::sleep_for(100ms);
  EXPECT_FALSE(loop.alive());
}

TEST(KeepaliveLoopTest, ABlockedRefreshStillFencesOnTime) {
  // A refresh that hangs (a frozen store) must not hold alive() true past the deadline.
  std::atomic<bool> release{false};
  KeepaliveLoop loop(
      10ms,
      [&] {
        while (!release) std::this_thread::sleep_for(5ms);
        return Status::unavailable("timed out");
      },
      150ms);
  EXPECT_TRUE(eventually([&] { return !loop.alive(); }, 5s));
  release = true;
}

}  // namespace
}  // namespace keel::membership
