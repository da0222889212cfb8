// FailureStreak: the first failure of a streak is logged, repeats only once per interval, and a
// success ends the streak with its length.
#include "core/failure_streak.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(FailureStreakTest, LogsFirstFailureThenOncePerInterval) {
  FailureStreak s(std::chrono::seconds(60));
  EXPECT_TRUE(s.fail(100 * kSecond));
  for (int i = 1; i < 500; ++i) EXPECT_FALSE(s.fail(100 * kSecond + i * kSecond / 10));
  EXPECT_TRUE(s.fail(161 * kSecond));
  EXPECT_FALSE(s.fail(162 * kSecond));
  EXPECT_EQ(s.streak(), 502);
}

TEST(FailureStreakTest, SuccessEndsTheStreakAndANewOneLogsAgain) {
  FailureStreak s(std::chrono::seconds(60));
  EXPECT_EQ(s.succeed(), 0);
  EXPECT_TRUE(s.fail(kSecond));
  EXPECT_FALSE(s.fail(2 * kSecond));
  EXPECT_EQ(s.succeed(), 2);
  EXPECT_EQ(s.streak(), 0);
  EXPECT_TRUE(s.fail(3 * kSecond));  // a new streak, although within the interval
}

}  // namespace
}  // namespace keel
