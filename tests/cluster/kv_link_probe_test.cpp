// The KV-link probe: delayed (moving) vs blocked (no block moves), over hand-fed samples.
#include "cluster/health/kv_link_probe.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kBlockedAfter{1000};

TEST(KvLinkProbeTest, ClassifiesOutstandingWorkByMovement) {
  EXPECT_EQ(classify_kv_link({false, milliseconds(60000)}, kBlockedAfter), KvLinkState::kClear);
  EXPECT_EQ(classify_kv_link({true, milliseconds(999)}, kBlockedAfter), KvLinkState::kDelayed);
  EXPECT_EQ(classify_kv_link({true, milliseconds(1000)}, kBlockedAfter), KvLinkState::kBlocked);
}

TEST(KvLinkProbeTest, ASlowLinkThatKeepsMovingIsDelayedNotBlocked) {
  const auto t0 = KvLinkWatch::Clock::now();
  KvLinkWatch watch(0, t0);
  // One block every 900 ms for 10 s: never a full second without movement.
  int64_t sent = 0;
  for (int ms = 100; ms <= 10000; ms += 100) {
    if (ms % 900 == 0) ++sent;
    EXPECT_EQ(watch.sample(sent, t0 + milliseconds(ms), kBlockedAfter), KvLinkState::kDelayed)
        << ms;
  }
}

TEST(KvLinkProbeTest, ALinkThatStopsIsBlockedOnceNothingMovedForTheWindow) {
  const auto t0 = KvLinkWatch::Clock::now();
  KvLinkWatch watch(3, t0);
  EXPECT_EQ(watch.sample(5, t0 + milliseconds(200), kBlockedAfter), KvLinkState::kDelayed);
  EXPECT_EQ(watch.sample(5, t0 + milliseconds(1100), kBlockedAfter), KvLinkState::kDelayed);
  EXPECT_EQ(watch.sample(5, t0 + milliseconds(1200), kBlockedAfter), KvLinkState::kBlocked);
  EXPECT_EQ(kv_link_state_name(KvLinkState::kBlocked), "blocked");
}

}  // namespace
}  // namespace keel::cluster
