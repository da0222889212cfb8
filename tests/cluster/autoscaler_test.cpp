// Autoscaler tests, without processes: a simulated group whose TEs appear when the decision asks
// for them and leave when it drains them, driven tick by tick with a demand trace — ramp up on
// the stable window, panic on a burst and holding in panic, the scale-down delay, scale to zero
// only after the grace period, activation from zero on a held request, min/max clamps, KV pressure
// and SLO misses adding a TE, the drain order, and the config's validation.
#include "cluster/policy/autoscaler.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace keel::cluster::autoscale {
namespace {

AutoscalerConfig config(int32_t min, int32_t max) {
  AutoscalerConfig c;
  c.min_replicas = min;
  c.max_replicas = max;
  c.target_concurrency = 2.0;
  c.stable_window_s = 10.0;
  c.panic_window_s = 1.0;
  c.scale_down_delay_s = 0.0;
  c.scale_to_zero_grace_s = 5.0;
  return c;
}

TeInfo te(int i, int32_t running = 0) {
  TeInfo t;
  t.id = "te-" + std::to_string(i);
  t.model = "m";
  t.load.num_running = running;
  t.load.kv_blocks_total = 100;
  return t;
}

// A group that does what the decisions say, at once; ticks every 0.1 s.
class Group {
 public:
  explicit Group(AutoscalerConfig c, int initial = 0) : config_(c) {
    for (int i = 0; i < initial; ++i) tes_.push_back(te(next_++));
  }
  ScaleDecision tick(int64_t in_flight, int64_t held = 0, SloCount ttft = {}) {
    GroupSignals s;
    s.now_s = now_;
    s.tes = tes_;
    s.in_flight = in_flight;
    s.held = held;
    s.ttft = ttft;
    for (size_t i = 0; i < s.tes.size(); ++i) {
      s.tes[i].load.kv_blocks_used = kv_used_;
      s.tes[i].load.num_running =
          static_cast<int32_t>(in_flight / static_cast<int64_t>(s.tes.size()));
    }
    ScaleDecision d = decide(s, config_, state_);
    for (int i = 0; i < d.scale_out; ++i) tes_.push_back(te(next_++));
    for (const std::string& id : d.drain) {
      std::erase_if(tes_, [&](const TeInfo& t) { return t.id == id; });
    }
    now_ += 0.1;
    return d;
  }
  // Ticks `seconds` at a constant demand; returns the last decision.
  ScaleDecision run(double seconds, int64_t in_flight) {
    ScaleDecision d;
    for (int i = 0; i < static_cast<int>(seconds * 10 + 0.5); ++i) d = tick(in_flight);
    return d;
  }
  [[nodiscard]] int size() const { return static_cast<int>(tes_.size()); }
  int64_t kv_used_ = 0;
  AutoscalerConfig config_;

 private:
  AutoscalerState state_;
  std::vector<TeInfo> tes_;
  double now_ = 100.0;
  int next_ = 0;
};

TEST(Autoscaler, RampsUpOnTheStableWindow) {
  AutoscalerConfig c = config(0, 8);
  c.panic_threshold = 100;  // no panic here: the stable window alone
  Group g(c, 1);
  g.run(10, 2);
  EXPECT_EQ(g.size(), 1) << "2 in flight at target 2 is one TE";
  g.run(10, 6);  // the stable average climbs to 6: 3 TEs
  EXPECT_EQ(g.size(), 3);
  ScaleDecision d = g.run(10, 6);
  EXPECT_EQ(g.size(), 3) << "steady at 3";
  EXPECT_EQ(d.reason, ScaleReason::kSteady);
  EXPECT_FALSE(d.panic);
}

TEST(Autoscaler, PanicsOnABurstAndNeverScalesDownWhilePanicking) {
  Group g(config(0, 10), 1);
  g.run(5, 2);
  ScaleDecision d = g.tick(8);  // panic window sees 8 → 4 TEs ≥ 2 × 1
  // One sample of 8 among the panic window's ~10: the panic average rises over a few ticks.
  for (int i = 0; i < 10 && !d.panic; ++i) d = g.tick(8);
  ASSERT_TRUE(d.panic);
  EXPECT_EQ(d.reason, ScaleReason::kPanic);
  EXPECT_GE(d.desired, 2);
  g.run(1, 8);
  const int peak = g.size();
  EXPECT_GE(peak, 4);
  // Demand falls: while panicking (a stable window past the last trigger) the count holds.
  d = g.run(5, 0);
  EXPECT_TRUE(d.panic);
  EXPECT_EQ(g.size(), peak) << "never down while panicking";
  // After the panic ends the stable window decides, then the grace keeps one TE.
  d = g.run(10, 0);
  EXPECT_FALSE(d.panic);
  EXPECT_LT(g.size(), peak);
}

TEST(Autoscaler, ScalesToZeroOnlyAfterTheGracePeriod) {
  AutoscalerConfig c = config(0, 4);
  c.stable_window_s = 2.0;
  c.panic_window_s = 0.5;
  c.scale_to_zero_grace_s = 6.0;
  Group g(c, 1);
  g.run(1, 1);
  ScaleDecision d = g.run(3, 0);  // stable window empty, but the grace has not passed
  EXPECT_EQ(g.size(), 1);
  EXPECT_EQ(d.reason, ScaleReason::kScaleToZeroGrace);
  d = g.run(2.5, 0);  // 5.5 s since the last request
  EXPECT_EQ(g.size(), 1);
  d = g.run(1, 0);
  EXPECT_EQ(g.size(), 0);
  // The decision that went to zero said why (the last one that drained).
}

TEST(Autoscaler, TheDecisionThatReachesZeroSaysSo) {
  AutoscalerConfig c = config(0, 4);
  c.stable_window_s = 1.0;
  c.panic_window_s = 0.2;
  c.scale_to_zero_grace_s = 2.0;
  Group g(c, 1);
  g.tick(1);
  ScaleDecision zero;
  for (int i = 0; i < 40 && g.size() > 0; ++i) zero = g.tick(0);
  ASSERT_EQ(g.size(), 0);
  EXPECT_EQ(zero.reason, ScaleReason::kScaleToZero);
  EXPECT_EQ(zero.desired, 0);
  ASSERT_EQ(zero.drain.size(), 1u);
}

TEST(Autoscaler, AHeldRequestAtZeroActivatesATeAtOnce) {
  Group g(config(0, 3));
  ScaleDecision d = g.tick(0);
  EXPECT_EQ(d.desired, 0);
  EXPECT_EQ(d.scale_out, 0);
  d = g.tick(0, /*held=*/1);
  EXPECT_EQ(d.reason, ScaleReason::kActivate);
  EXPECT_EQ(d.scale_out, 1) << "the first tick that sees the held request binds one TE";
  EXPECT_EQ(g.size(), 1);
}

TEST(Autoscaler, ABurstAtZeroBindsWhatThePanicWindowNeeds) {
  Group g(config(0, 3));
  const ScaleDecision d = g.tick(0, /*held=*/20);
  EXPECT_EQ(d.reason, ScaleReason::kMaxReplicas) << "10 wanted, clamped to 3";
  EXPECT_EQ(d.scale_out, 3);
}

TEST(Autoscaler, MinAndMaxClamp) {
  Group g(config(2, 3));
  ScaleDecision d = g.tick(0);
  EXPECT_EQ(d.reason, ScaleReason::kMinReplicas);
  EXPECT_EQ(d.scale_out, 2);
  d = g.run(30, 0);
  EXPECT_EQ(g.size(), 2) << "never below --min, however idle";
  d = g.run(20, 50);
  EXPECT_EQ(g.size(), 3) << "never above --max";
  EXPECT_EQ(d.reason, ScaleReason::kMaxReplicas);
}

TEST(Autoscaler, TheScaleDownDelayHoldsTheRecentPeak) {
  AutoscalerConfig c = config(1, 8);
  c.panic_threshold = 100;
  c.stable_window_s = 1.0;
  c.panic_window_s = 0.2;
  c.scale_down_delay_s = 3.0;
  Group g(c, 4);
  g.run(2, 8);
  EXPECT_EQ(g.size(), 4);
  ScaleDecision d = g.run(2, 2);  // the stable window wants 1; the delay window remembers 4
  EXPECT_EQ(g.size(), 4);
  EXPECT_EQ(d.reason, ScaleReason::kScaleDownDelay);
  g.run(3, 2);
  EXPECT_EQ(g.size(), 1);
}

TEST(Autoscaler, KvPressureAddsATe) {
  Group g(config(0, 4), 1);
  g.kv_used_ = 95;
  const ScaleDecision d = g.tick(1);
  EXPECT_EQ(d.reason, ScaleReason::kKvPressure);
  EXPECT_EQ(d.scale_out, 1);
  EXPECT_NEAR(d.kv_use, 0.95, 1e-9);
}

TEST(Autoscaler, AnSloMissAddsATeAndWaitsForFreshEvidence) {
  AutoscalerConfig c = config(0, 4);
  c.ttft_slo_s = 0.5;
  c.slo_min_samples = 10;
  Group g(c, 1);
  ScaleDecision d = g.tick(1, 0, {5, 5});
  EXPECT_EQ(d.ttft_attainment, -1.0) << "5 observations are too few to judge";
  EXPECT_EQ(d.scale_out, 0);
  d = g.tick(1, 0, {1, 10});  // 6 of 15 within the SLO: 40 %
  EXPECT_EQ(d.reason, ScaleReason::kSloMiss);
  EXPECT_NEAR(d.ttft_attainment, 0.4, 1e-9);
  EXPECT_EQ(d.scale_out, 1);
  // The misses before the scale-up do not count again: no evidence yet, no second TE.
  d = g.tick(1, 0, {0, 3});
  EXPECT_EQ(d.ttft_attainment, -1.0);
  EXPECT_EQ(d.scale_out, 0);
  d = g.tick(1, 0, {10, 10});  // 10 of 13 = 77 % < 90 %: one more
  EXPECT_EQ(d.reason, ScaleReason::kSloMiss);
  EXPECT_EQ(g.size(), 3);
  d = g.tick(1, 0, {20, 20});
  EXPECT_EQ(d.scale_out, 0) << "attainment 100 %";
  EXPECT_TRUE(d.drain.empty()) << "a TE added for the SLO stays a stable window";
  EXPECT_EQ(d.reason, ScaleReason::kScaleDownDelay);
  g.run(10.5, 1);
  EXPECT_EQ(g.size(), 1) << "then concurrency decides again";
}

TEST(Autoscaler, DrainsTheLeastLoadedTes) {
  AutoscalerConfig c = config(0, 4);
  c.stable_window_s = 0.5;
  c.panic_window_s = 0.1;
  AutoscalerState state;
  GroupSignals s;
  s.now_s = 1.0;
  s.tes = {te(0, 3), te(1, 0), te(2, 1)};
  s.in_flight = 4;
  const ScaleDecision d = decide(s, c, state);  // 4 / 2 = 2 TEs
  EXPECT_EQ(d.desired, 2);
  ASSERT_EQ(d.drain.size(), 1u);
  EXPECT_EQ(d.drain[0], "te-1");
}

TEST(Autoscaler, PendingTesCountAndAreNeverDrained) {
  AutoscalerConfig c = config(0, 4);
  AutoscalerState state;
  GroupSignals s;
  s.now_s = 1.0;
  s.pending = 2;
  s.in_flight = 2;
  const ScaleDecision d = decide(s, c, state);
  EXPECT_EQ(d.current, 2);
  EXPECT_EQ(d.scale_out, 0);
  EXPECT_TRUE(d.drain.empty());
}

TEST(Autoscaler, ConfigValidation) {
  EXPECT_TRUE(config(0, 3).validate().ok());
  EXPECT_FALSE(config(2, 1).validate().ok());
  EXPECT_FALSE(config(0, 0).validate().ok());
  AutoscalerConfig c = config(0, 3);
  c.panic_window_s = 20;
  EXPECT_FALSE(c.validate().ok());
  c = config(0, 3);
  c.target_concurrency = 0;
  EXPECT_FALSE(c.validate().ok());
  c = config(0, 3);
  c.slo_target = 1.5;
  EXPECT_FALSE(c.validate().ok());
}

}  // namespace
}  // namespace keel::cluster::autoscale
