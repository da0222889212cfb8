// semi-PD's split controller: the fits recover known coefficients, a TTFT miss grows x and a TPOT
// miss grows y by what the model needs (capped by max_step and max_cores, a bounded total taken
// from the other side only while it keeps its SLO), degenerate data keeps the split with a reason,
// and a closed loop against a synthetic system converges to a split meeting both SLOs and stays.
#include "engine/semi_pd_controller.h"

#include <gtest/gtest.h>

#include <random>

namespace keel::engine {
namespace {

// The synthetic system: TTFT = kA1/(x − λ′) + kB1, TPOT = kA2/y + kB2.
constexpr double kA1 = 1.0, kB1 = 0.1, kA2 = 0.1, kB2 = 0.01;

double true_ttft(int32_t x, double lp) { return x > lp ? kA1 / (x - lp) + kB1 : 100.0; }
double true_tpot(int32_t y) { return kA2 / y + kB2; }

ControllerConfig config() {
  ControllerConfig c;
  c.ttft_slo_s = 0.5;
  c.tpot_slo_s = 0.04;
  c.step = 1;
  c.max_step = 8;
  c.min_cores = 1;
  c.max_cores = 12;
  c.headroom = 0.1;
  c.cooldown_windows = 1;
  EXPECT_TRUE(c.validate().ok());
  return c;
}

// Exact points at splits (x, y) with load λ′, as the history a few windows would leave.
ControllerState state_with_points(int32_t x, int32_t y,
                                  const std::vector<std::tuple<int32_t, int32_t, double>>& pts) {
  ControllerState s;
  s.x = x;
  s.y = y;
  for (auto [px, py, lp] : pts) s.history.push_back({px, py, lp, true_ttft(px, lp), true_tpot(py)});
  return s;
}

WindowObservation observe(int32_t x, int32_t y, double lp) {
  WindowObservation o;
  o.x = x;
  o.y = y;
  o.ttft_s = true_ttft(x, lp);
  o.tpot_s = true_tpot(y);
  o.arrival_rate = 2.0;
  o.prefill_core_s = lp / 2.0;
  return o;
}

// The smallest cores ≥ from whose `pred` is ≤ target, or from + cap when none is.
int32_t smallest_meeting(int32_t from, int32_t cap, double target, auto pred) {
  for (int32_t c = from + 1; c <= from + cap; ++c) {
    if (pred(c) <= target) return c;
  }
  return from + cap;
}

TEST(SemiPdControllerTest, FitsRecoverKnownCoefficients) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(0.99, 1.01), load(0.5, 1.5);
  std::vector<SplitPoint> pts;
  for (int32_t x : {2, 3, 4, 6, 8}) {
    const double lp = load(rng);
    pts.push_back({x, x, lp, true_ttft(x, lp) * noise(rng), true_tpot(x) * noise(rng)});
  }
  const LatencyFit t = fit_ttft(pts), d = fit_tpot(pts);
  ASSERT_TRUE(t.usable()) << t.degenerate;
  ASSERT_TRUE(d.usable()) << d.degenerate;
  EXPECT_EQ(t.num_points, 5);
  EXPECT_NEAR(t.a, kA1, 0.05 * kA1);
  EXPECT_NEAR(t.b, kB1, 0.02);
  EXPECT_NEAR(d.a, kA2, 0.05 * kA2);
  EXPECT_NEAR(d.b, kB2, 0.002);
  EXPECT_NEAR(*predict_ttft(t, 5, 1.0), true_ttft(5, 1.0), 0.02);
  EXPECT_FALSE(predict_ttft(t, 1, 1.0).has_value()) << "x ≤ λ′: the queue has no steady state";
  EXPECT_DOUBLE_EQ(lambda_prime(3.0, 0.5), 1.5);
  EXPECT_EQ(lambda_prime(-1.0, 0.5), 0.0);
}

TEST(SemiPdControllerTest, FitKeepsTheInterceptNonNegative) {
  // TPOT = 0.1/y − 0.01 exactly: the unconstrained intercept is −0.01, so the fit goes through
  // the origin with the least-squares slope Σ u·l / Σ u².
  std::vector<SplitPoint> pts;
  double sul = 0, suu = 0;
  for (int32_t y : {1, 2, 4}) {
    const double l = 0.1 / y - 0.01;
    pts.push_back({1, y, 0, std::nullopt, l});
    sul += l / y;
    suu += 1.0 / (y * y);
  }
  const LatencyFit f = fit_tpot(pts);
  ASSERT_TRUE(f.usable()) << f.degenerate;
  EXPECT_EQ(f.b, 0.0);
  EXPECT_NEAR(f.a, sul / suu, 1e-12);
  EXPECT_FALSE(fit_ttft(pts).usable()) << "no TTFT in these points";
}

TEST(SemiPdControllerTest, TtftMissGrowsPrefillToWhatTheModelNeeds) {
  const ControllerConfig cfg = config();
  const double lp = 1.5;
  const ControllerState s = state_with_points(3, 6, {{3, 6, 1.2}, {4, 6, 1.5}, {3, 5, 1.0}});
  const Decision d = decide(s, observe(3, 6, lp), cfg);
  const int32_t want = smallest_meeting(3, cfg.max_step, 0.9 * cfg.ttft_slo_s,
                                        [&](int32_t x) { return true_ttft(x, lp); });
  EXPECT_EQ(d.reason, DecisionReason::kGrewPrefill) << d.detail;
  EXPECT_TRUE(d.changed);
  EXPECT_EQ(d.x, want);
  EXPECT_EQ(d.y, 6) << "unbounded total: decode keeps its cores";
  ASSERT_TRUE(d.predicted_ttft_s.has_value());
  EXPECT_LE(*d.predicted_ttft_s, 0.9 * cfg.ttft_slo_s + 1e-9);
  EXPECT_EQ(d.next.x, want);
  EXPECT_EQ(d.next.cooldown_left, cfg.cooldown_windows);
  EXPECT_EQ(d.next.history.size(), 4u) << "the window's point is recorded";
}

TEST(SemiPdControllerTest, TpotMissGrowsDecode) {
  const ControllerConfig cfg = config();
  const ControllerState s = state_with_points(6, 2, {{6, 2, 1.0}, {6, 1, 1.2}, {5, 3, 1.3}});
  const Decision d = decide(s, observe(6, 2, 1.0), cfg);
  const int32_t want = smallest_meeting(2, cfg.max_step, 0.9 * cfg.tpot_slo_s, true_tpot);
  EXPECT_EQ(d.reason, DecisionReason::kGrewDecode) << d.detail;
  EXPECT_EQ(d.x, 6);
  EXPECT_EQ(d.y, want);
  EXPECT_GT(want, 2);
}

TEST(SemiPdControllerTest, BothMetKeepsTheSplit) {
  const ControllerConfig cfg = config();
  const ControllerState s = state_with_points(6, 5, {{6, 5, 1.0}, {5, 4, 1.2}});
  const Decision d = decide(s, observe(6, 5, 1.0), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kBothMet);
  EXPECT_FALSE(d.changed);
  EXPECT_EQ(d.x, 6);
  EXPECT_EQ(d.y, 5);
  // A window with no finished request has no latency: nothing misses.
  WindowObservation empty;
  empty.x = 1;
  empty.y = 1;
  EXPECT_EQ(decide(s, empty, cfg).reason, DecisionReason::kBothMet);
  EXPECT_EQ(decide(s, empty, cfg).next.history.size(), 2u) << "no point without latencies";
}

TEST(SemiPdControllerTest, DegenerateDataKeepsTheSplitAndSaysWhy) {
  const ControllerConfig cfg = config();
  // One split, one load: no second point to fit either model.
  ControllerState one = state_with_points(2, 1, {{2, 1, 1.5}});
  Decision d = decide(one, observe(2, 1, 1.5), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kFitDegenerate);
  EXPECT_FALSE(d.changed);
  EXPECT_TRUE(d.ttft_fit.lacks_points);
  EXPECT_NE(d.detail.find("fewer than 2 distinct"), std::string::npos) << d.detail;
  // The same with probing on takes one step to get a second point.
  ControllerConfig probe = cfg;
  probe.probe_unfitted = true;
  d = decide(one, observe(2, 1, 1.5), probe);
  EXPECT_EQ(d.reason, DecisionReason::kProbePrefill);
  EXPECT_EQ(d.x, 3);
  // Overloaded windows (x ≤ λ′) are not fitted.
  ControllerState over = state_with_points(1, 4, {{1, 4, 1.5}, {1, 4, 2.0}});
  d = decide(over, observe(1, 4, 1.8), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kFitDegenerate);
  EXPECT_NE(d.detail.find("dropped with x ≤ λ′"), std::string::npos) << d.detail;
  // Latency that rises with cores: a negative slope.
  ControllerState bad;
  bad.x = 3;
  bad.y = 2;
  bad.history = {{2, 2, 0.5, 0.4, 0.05}, {4, 2, 0.5, 0.9, 0.05}};
  WindowObservation o = observe(3, 2, 0.5);
  o.ttft_s = 0.8;
  d = decide(bad, o, cfg);
  EXPECT_EQ(d.reason, DecisionReason::kFitDegenerate);
  EXPECT_NE(d.detail.find("≤ 0"), std::string::npos) << d.detail;
  EXPECT_FALSE(d.predicted_ttft_s.has_value());
}

TEST(SemiPdControllerTest, BoundsAreRespected) {
  ControllerConfig cfg = config();
  const std::vector<std::tuple<int32_t, int32_t, double>> pts = {{2, 4, 1.5}, {3, 5, 1.5}};
  // max_step caps one decision: from x = 2, λ′ = 1.9 needs x = 5; two steps give 4.
  cfg.max_step = 2;
  Decision d = decide(state_with_points(2, 5, pts), observe(2, 5, 1.9), cfg);
  EXPECT_EQ(d.x, 4);
  EXPECT_NE(d.detail.find("still predicted to miss"), std::string::npos) << d.detail;
  // max_cores: at the cap nothing grows.
  cfg = config();
  cfg.max_cores = 3;
  d = decide(state_with_points(3, 3, pts), observe(3, 3, 1.9), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kNoRoom);
  EXPECT_EQ(d.x, 3);
  cfg.max_cores = 4;
  d = decide(state_with_points(3, 3, pts), observe(3, 3, 1.9), cfg);
  EXPECT_EQ(d.x, 4) << "clamped to max_cores";
  // Bounded total 9: x grows into decode's cores only as far as TPOT still meets with headroom
  // (y ≥ 4 here), so from (2, 6) x reaches 5, not beyond, and y never drops below 4.
  cfg = config();
  cfg.max_total_cores = 9;
  d = decide(state_with_points(2, 6, pts), observe(2, 6, 1.5), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kGrewPrefill) << d.detail;
  EXPECT_LE(d.x + d.y, 9);
  EXPECT_LE(true_tpot(d.y), 0.9 * cfg.tpot_slo_s);
  EXPECT_EQ(d.x, 5);
  // Decode at the edge of its SLO gives nothing: no room, no oscillation.
  d = decide(state_with_points(5, 4, pts), observe(5, 4, 2.6), cfg);
  EXPECT_EQ(d.reason, DecisionReason::kNoRoom) << d.detail;
  EXPECT_FALSE(d.changed);
}

TEST(SemiPdControllerTest, CooldownAfterAChange) {
  const ControllerConfig cfg = config();
  ControllerState seeded = state_with_points(3, 6, {{3, 6, 1.2}, {4, 6, 1.5}});
  Decision d = decide(seeded, observe(3, 6, 1.5), cfg);
  ASSERT_TRUE(d.changed);
  const Decision next = decide(d.next, observe(3, 6, 2.5), cfg);
  EXPECT_EQ(next.reason, DecisionReason::kCooldown);
  EXPECT_FALSE(next.changed);
  EXPECT_EQ(next.next.cooldown_left, 0);
}

TEST(SemiPdControllerTest, FullHistoryKeepsEachSplitsLatestPoint) {
  ControllerConfig cfg = config();
  cfg.history_windows = 3;
  ControllerState s = state_with_points(3, 4, {{2, 4, 1.5}});
  for (int w = 0; w < 5; ++w) s = decide(s, observe(3, 4, 1.2 + 0.1 * w), cfg).next;
  ASSERT_EQ(s.history.size(), 3u);
  EXPECT_EQ(s.history.front().x, 2) << "the only point at x = 2 stays";
  EXPECT_DOUBLE_EQ(s.history.back().lambda_prime, 1.6) << "the newest point is last";
  EXPECT_TRUE(fit_ttft(s.history).usable());
}

TEST(SemiPdControllerTest, ConfigValidation) {
  ControllerConfig c = config();
  c.ttft_slo_s = 0;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.percentile = 101;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.max_cores = 0;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.max_total_cores = 1;
  EXPECT_FALSE(c.validate().ok());
  c = config();
  c.headroom = 1.0;
  EXPECT_FALSE(c.validate().ok());
}

// The controller against the synthetic system with a Poisson-like load (λ′ varies ±20 % per
// window) and ±5 % measurement noise, from a split that misses.
void run_closed_loop(ControllerConfig cfg, int32_t x0, int32_t y0, const char* label) {
  cfg.probe_unfitted = true;  // from one split there is nothing to fit
  SemiPdController c(cfg, x0, y0);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> load(1.2, 1.8), noise(0.95, 1.05);
  constexpr int kWindows = 40, kSettleBy = 25;
  int32_t last_change = -1;
  std::string trace;  // printed when the loop does not settle
  for (int w = 0; w < kWindows; ++w) {
    const double lp = load(rng);
    WindowObservation o = observe(c.state().x, c.state().y, lp);
    *o.ttft_s *= noise(rng);
    *o.tpot_s *= noise(rng);
    const Decision d = c.on_window(o);
    if (d.changed) last_change = w;
    trace += "window " + std::to_string(w) + ": (" + std::to_string(o.x) + ", " +
             std::to_string(o.y) + ") → (" + std::to_string(d.x) + ", " + std::to_string(d.y) +
             ") " + d.detail + "\n";
    if (w >= kSettleBy) {
      EXPECT_LE(*o.ttft_s, cfg.ttft_slo_s) << label << " window " << w;
      EXPECT_LE(*o.tpot_s, cfg.tpot_slo_s) << label << " window " << w;
    }
  }
  const int32_t x = c.state().x, y = c.state().y;
  std::printf("[ semi-PD ] %s: split (%d, %d) after %d windows, last change in window %d\n", label,
              x, y, kWindows, last_change);
  EXPECT_LT(last_change, kSettleBy) << label << ": still changing\n" << trace;
  // Met at the heaviest load of the trace, by the true model.
  EXPECT_LE(true_ttft(x, 1.8), cfg.ttft_slo_s) << label;
  EXPECT_LE(true_tpot(y), cfg.tpot_slo_s) << label;
  if (cfg.max_total_cores > 0) {
    EXPECT_LE(x + y, cfg.max_total_cores);
  }
}

// The SLOs need x ≥ 5 (at the heaviest λ′ = 1.8) and y ≥ 4 (with headroom).
TEST(SemiPdControllerTest, ClosedLoopConvergesUnbounded) {
  run_closed_loop(config(), 1, 1, "unbounded from (1, 1)");
}

TEST(SemiPdControllerTest, ClosedLoopConvergesWithBoundedTotal) {
  ControllerConfig cfg = config();
  cfg.max_total_cores = 9;  // exactly what both need: prefill must take decode's spare cores
  run_closed_loop(cfg, 1, 8, "total 9 from (1, 8)");
}

// Too few cores for both SLOs (x + y ≤ 7 against 5 + 4 needed): the controller must settle
// instead of trading cores back and forth.
TEST(SemiPdControllerTest, InfeasibleBoundDoesNotOscillate) {
  ControllerConfig cfg = config();
  cfg.max_total_cores = 7;
  cfg.probe_unfitted = true;
  SemiPdController c(cfg, 1, 6);
  std::mt19937 rng(13);
  std::uniform_real_distribution<double> load(1.2, 1.8), noise(0.95, 1.05);
  int32_t changes = 0, last_change = -1;
  std::string trace;
  for (int w = 0; w < 60; ++w) {
    WindowObservation o = observe(c.state().x, c.state().y, load(rng));
    *o.ttft_s *= noise(rng);
    *o.tpot_s *= noise(rng);
    const Decision d = c.on_window(o);
    trace += std::to_string(w) + ": (" + std::to_string(d.x) + ", " + std::to_string(d.y) + ") " +
             d.detail + "\n";
    if (d.changed) ++changes, last_change = w;
  }
  EXPECT_LE(c.state().x + c.state().y, 7);
  EXPECT_LT(last_change, 30) << trace;
  EXPECT_LE(changes, 8) << trace;
}

}  // namespace
}  // namespace keel::engine
