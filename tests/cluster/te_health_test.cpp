// cluster::health::classify: the progress rule, over hand-built snapshots (no processes, no
// clocks).
#include "cluster/health/te_health.h"

#include <gtest/gtest.h>

namespace keel::cluster::health {
namespace {

using std::chrono::milliseconds;

HealthConfig config() {
  HealthConfig c;
  c.hang_timeout = milliseconds(2000);
  c.report_timeout = milliseconds(1500);
  return c;
}

TeProgressSnapshot reporting(bool has_work, int since_progress_ms) {
  TeProgressSnapshot s;
  s.reported = true;
  s.has_work = has_work;
  s.since_report = milliseconds(100);
  s.since_progress = milliseconds(since_progress_ms);
  return s;
}

TEST(TeHealthTest, WorkWithoutProgressForTheHangTimeoutIsHung) {
  EXPECT_EQ(classify(reporting(true, 2001), config()), TeState::kHung);
  EXPECT_EQ(classify(reporting(true, 60000), config()), TeState::kHung);
  EXPECT_EQ(classify(reporting(true, 1999), config()), TeState::kBusy);
}

TEST(TeHealthTest, SlowButMovingStepCounterIsNeverHung) {
  // A 2K-token prompt in 128-token chunks under a CPU hog: 16 steps, each 1.9 s apart. Every
  // step resets since_progress, so the TE stays busy through all of them.
  int64_t elapsed_ms = 0;
  for (int step = 0; step < 16; ++step) {
    for (int ms = 0; ms <= 1900; ms += 100) {
      EXPECT_EQ(classify(reporting(true, ms), config()), TeState::kBusy) << step << " " << ms;
      elapsed_ms += 100;
    }
  }
  EXPECT_GT(elapsed_ms, 10 * config().hang_timeout.count());
}

TEST(TeHealthTest, NoWorkIsHealthyWhateverTheCounter) {
  EXPECT_EQ(classify(reporting(false, 0), config()), TeState::kHealthy);
  EXPECT_EQ(classify(reporting(false, 3'600'000), config()), TeState::kHealthy);
}

TEST(TeHealthTest, SilenceIsHungAndAClosedLinkIsDead) {
  TeProgressSnapshot s = reporting(false, 0);
  s.since_report = milliseconds(1501);
  EXPECT_EQ(classify(s, config()), TeState::kHung);  // a SIGSTOPped TE: link up, no reports
  s.has_work = true;
  EXPECT_EQ(classify(s, config()), TeState::kHung);
  s.link_open = false;
  EXPECT_EQ(classify(s, config()), TeState::kDead);  // kill -9
  TeProgressSnapshot busy = reporting(true, 10);
  busy.link_open = false;
  EXPECT_EQ(classify(busy, config()), TeState::kDead);
}

TEST(TeHealthTest, AStartingTeIsNotJudgedByProgress) {
  TeProgressSnapshot s;
  s.reported = false;
  s.has_work = true;
  s.since_report = milliseconds(60000);
  s.since_progress = milliseconds(60000);
  EXPECT_EQ(classify(s, config()), TeState::kHealthy);
  s.link_open = false;
  EXPECT_EQ(classify(s, config()), TeState::kDead);
}

TEST(TeHealthTest, OutOfServiceKeepsTheStateThatTookItOut) {
  // In service: the verdict.
  EXPECT_EQ(shown_state(TeState::kHealthy, true, true, TeState::kBusy), TeState::kBusy);
  // Hung, then the JE closes its link: still shown hung.
  EXPECT_EQ(shown_state(TeState::kHung, false, true, TeState::kDead), TeState::kHung);
  // Busy, then its link closes: dead.
  EXPECT_EQ(shown_state(TeState::kBusy, false, true, TeState::kDead), TeState::kDead);
  // Taken out by a failed call while its reports still look fine: dead.
  EXPECT_EQ(shown_state(TeState::kBusy, false, true, TeState::kBusy), TeState::kDead);
  // Not up yet (never reported): shown as it is.
  EXPECT_EQ(shown_state(TeState::kHealthy, false, false, TeState::kHealthy), TeState::kHealthy);
}

TEST(TeHealthTest, NamesRoundTripAndConfigIsValidated) {
  for (TeState s : {TeState::kHealthy, TeState::kBusy, TeState::kHung, TeState::kDead}) {
    EXPECT_EQ(parse_te_state(te_state_name(s)), s);
  }
  EXPECT_FALSE(parse_te_state("ok").has_value());
  EXPECT_TRUE(serving(TeState::kBusy));
  EXPECT_FALSE(serving(TeState::kHung));
  EXPECT_TRUE(config().validate().ok());
  HealthConfig bad = config();
  bad.hang_timeout = milliseconds(0);
  EXPECT_FALSE(bad.validate().ok());
}

}  // namespace
}  // namespace keel::cluster::health
