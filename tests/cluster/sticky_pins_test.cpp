// StickyPins (cluster/job/sticky_pins.h) on a manual clock: a program's TE and a job's TE live
// for the TTL (pushed back when noted again), tenants scope programs, calls without a program are
// noted per job only, a job's entry is taken once, and each table stays within its bound (the
// earliest deadline gives way).
#include "cluster/job/sticky_pins.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

TEST(StickyPinsTest, AProgramsTeLivesForTheTtlAndANewNotePushesItBack) {
  StickyPins pins(60 * kSecond);
  pins.note("", "agent-1", JobRef{"g", 1}, "te-1", 0);
  EXPECT_EQ(pins.te_for_program("", "agent-1", 59 * kSecond), "te-1");
  EXPECT_EQ(pins.te_for_program("", "agent-1", 60 * kSecond), std::nullopt);
  pins.note("", "agent-1", JobRef{"g", 2}, "te-0", 50 * kSecond);  // the next turn, elsewhere
  EXPECT_EQ(pins.te_for_program("", "agent-1", 100 * kSecond), "te-0");
  pins.expire(110 * kSecond);
  EXPECT_EQ(pins.num_programs(), 0u);
  EXPECT_EQ(pins.num_jobs(), 0u);
}

TEST(StickyPinsTest, TenantsScopeProgramsAndCallsWithoutOneAreNotedPerJobOnly) {
  StickyPins pins(10 * kSecond);
  pins.note("alice", "agent-1", JobRef{"g", 1}, "te-0", 0);
  pins.note("bob", "agent-1", JobRef{"g", 2}, "te-1", 0);
  pins.note("bob", "", JobRef{"g", 3}, "te-2", 0);
  EXPECT_EQ(pins.te_for_program("alice", "agent-1", 1), "te-0");
  EXPECT_EQ(pins.te_for_program("bob", "agent-1", 1), "te-1");
  EXPECT_EQ(pins.te_for_program("carol", "agent-1", 1), std::nullopt);
  EXPECT_EQ(pins.te_for_program("bob", "", 1), std::nullopt);
  EXPECT_EQ(pins.num_programs(), 2u);
  EXPECT_EQ(pins.num_jobs(), 3u);
}

TEST(StickyPinsTest, AJobsTeIsTakenOnceAndNotAfterItsTtl) {
  StickyPins pins(10 * kSecond);
  pins.note("", "p", JobRef{"g", 1}, "te-1", 0);
  pins.note("", "p", JobRef{"g", 2}, "te-0", 0);
  EXPECT_EQ(pins.take_job(JobRef{"g", 1}, kSecond), "te-1");
  EXPECT_EQ(pins.take_job(JobRef{"g", 1}, kSecond), std::nullopt);  // released already
  EXPECT_EQ(pins.take_job(JobRef{"other", 1}, kSecond), std::nullopt);
  EXPECT_EQ(pins.take_job(JobRef{"g", 2}, 10 * kSecond), std::nullopt);  // its pin expired
  EXPECT_EQ(pins.num_jobs(), 0u);
  // The program's entry outlives the release: its TE still holds the most of its context.
  EXPECT_EQ(pins.te_for_program("", "p", kSecond), "te-0");
}

TEST(StickyPinsTest, EachTableStaysWithinItsBoundOldestDeadlineFirst) {
  StickyPins pins(100 * kSecond, /*max_entries=*/3);
  for (int i = 0; i < 5; ++i) {
    pins.note("", "p" + std::to_string(i), JobRef{"g", i}, "te-" + std::to_string(i), i * kSecond);
  }
  EXPECT_EQ(pins.num_programs(), 3u);
  EXPECT_EQ(pins.num_jobs(), 3u);
  EXPECT_EQ(pins.te_for_program("", "p0", 5 * kSecond), std::nullopt);
  EXPECT_EQ(pins.te_for_program("", "p1", 5 * kSecond), std::nullopt);
  EXPECT_EQ(pins.te_for_program("", "p4", 5 * kSecond), "te-4");
  EXPECT_EQ(pins.take_job(JobRef{"g", 0}, 5 * kSecond), std::nullopt);
  EXPECT_EQ(pins.take_job(JobRef{"g", 2}, 5 * kSecond), "te-2");
  // Noting p2 again pushes its deadline back: p3 is now the oldest and goes first.
  pins.note("", "p2", JobRef{"g", 7}, "te-2", 6 * kSecond);
  pins.note("", "p5", JobRef{"g", 8}, "te-5", 7 * kSecond);
  EXPECT_EQ(pins.te_for_program("", "p3", 8 * kSecond), std::nullopt);
  EXPECT_EQ(pins.te_for_program("", "p2", 8 * kSecond), "te-2");
}

}  // namespace
}  // namespace keel::cluster
