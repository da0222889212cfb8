// SpecEE's two-level layer scheduling: the offline ranking, the ring (empty, wrap-around, a
// 5-layer model where ± 2 covers everything), and a synthetic 32-layer exit trace with drift on
// which the active set stays well below 32 layers and catches most true exits, far more than a
// random set of the same size would.
#include "engine/exit_layer_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>

namespace keel::engine {
namespace {

std::vector<int32_t> active_layers(const ExitLayerSchedule& s) {
  std::vector<int32_t> out;
  for (int32_t l = 0; l < static_cast<int32_t>(s.mask().size()); ++l) {
    if (s.active(l)) out.push_back(l);
  }
  return out;
}

ExitLayerSchedule make(const ExitScheduleConfig& cfg, std::vector<int32_t> offline) {
  Result<ExitLayerSchedule> r = ExitLayerSchedule::create(cfg, std::move(offline));
  EXPECT_TRUE(r.ok()) << r.error().to_string();
  return std::move(r).value();
}

TEST(ExitLayerScheduleTest, RanksLayersByExitFrequency) {
  //                               0  1  2  3  4  5  6  7 (final)
  const std::vector<int64_t> hist = {0, 5, 9, 5, 0, 7, 1, 50};
  Result<std::vector<int32_t>> top = rank_exit_layers(hist, 8, 3);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(*top, (std::vector<int32_t>{1, 2, 5})) << "9, 7, then the lower of the 5s";
  top = rank_exit_layers(hist, 8, 10);
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(*top, (std::vector<int32_t>{1, 2, 3, 5, 6})) << "no zero counts, no final layer";
  EXPECT_FALSE(rank_exit_layers(hist, 9, 3).ok()) << "histogram of another depth";
  EXPECT_FALSE(rank_exit_layers({1, -1, 3}, 3, 1).ok());
  EXPECT_FALSE(rank_exit_layers(hist, 8, -1).ok());
}

TEST(ExitLayerScheduleTest, RejectsBadConfigAndOfflineSets) {
  ExitScheduleConfig cfg;
  cfg.num_layers = 8;
  EXPECT_FALSE(ExitLayerSchedule::create(cfg, {3, 8}).ok()) << "layer outside the model";
  EXPECT_FALSE(ExitLayerSchedule::create(cfg, {3, 3}).ok()) << "listed twice";
  cfg.radius = -1;
  EXPECT_FALSE(ExitLayerSchedule::create(cfg, {}).ok());
  cfg.radius = 2;
  cfg.num_layers = 0;
  EXPECT_FALSE(ExitLayerSchedule::create(cfg, {}).ok());
}

TEST(ExitLayerScheduleTest, EmptyHistoryIsTheOfflineSetAndTheFinalLayer) {
  ExitScheduleConfig cfg;
  cfg.num_layers = 32;
  const ExitLayerSchedule s = make(cfg, {21, 15, 17});
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{15, 17, 21, 31}));
  EXPECT_EQ(s.num_active(), 4);
  EXPECT_EQ(s.num_predictor_layers(), 3);
  EXPECT_EQ(s.next_active(0), 15);
  EXPECT_EQ(s.next_active(16), 17);
  EXPECT_EQ(s.next_active(22), 31) << "no active layer left: the pass ends at the final layer";
  const ExitLayerSchedule none = make(cfg, {});
  EXPECT_EQ(active_layers(none), (std::vector<int32_t>{31}));
}

TEST(ExitLayerScheduleTest, EachExitActivatesItsNeighbours) {
  ExitScheduleConfig cfg;
  cfg.num_layers = 32;
  ExitLayerSchedule s = make(cfg, {20});
  s.record(10);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{8, 9, 10, 11, 12, 20, 31}));
  s.record(30);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{8, 9, 10, 11, 12, 20, 28, 29, 30, 31}))
      << "clipped at the final layer";
  EXPECT_EQ(s.num_predictor_layers(), 9);
  EXPECT_EQ(s.next_active(13), 20);
}

TEST(ExitLayerScheduleTest, FiveLayerModelPlusMinusTwoCoversEverything) {
  ExitScheduleConfig cfg;
  cfg.num_layers = 5;
  ExitLayerSchedule s = make(cfg, {});
  EXPECT_EQ(s.num_active(), 1);
  s.record(0);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{0, 1, 2, 4})) << "clipped at layer 0";
  s.record(2);
  EXPECT_EQ(s.num_active(), 5) << "layer 2 ± 2 is the whole model";
  s.record(4);
  EXPECT_EQ(s.num_active(), 5);
  EXPECT_EQ(s.num_recorded(), 2) << "a pass to the final layer is no exit";
}

TEST(ExitLayerScheduleTest, RingWrapsAround) {
  ExitScheduleConfig cfg;
  cfg.num_layers = 32;
  cfg.history = 3;
  cfg.radius = 0;
  ExitLayerSchedule s = make(cfg, {});
  for (int32_t l : {1, 2, 3}) s.record(l);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{1, 2, 3, 31}));
  s.record(4);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{2, 3, 4, 31})) << "the oldest (1) left";
  s.record(5);
  s.record(6);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{4, 5, 6, 31}));
  s.record(6);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{5, 6, 31})) << "a repeated exit counts once";
  s.record(31);
  EXPECT_EQ(active_layers(s), (std::vector<int32_t>{5, 6, 31})) << "the final layer: no exit";
  EXPECT_EQ(s.num_recorded(), 7);
  cfg.history = 0;
  ExitLayerSchedule off = make(cfg, {9});
  off.record(3);
  EXPECT_EQ(active_layers(off), (std::vector<int32_t>{9, 31})) << "no online level";
}

// The synthetic trace: a token's earliest correct exit layer is normal around a mean that drifts
// (20 ± 6 layers, period 3000 tokens) with spread kSigma; kHardShare of tokens never settle
// early (they end at the final layer).
constexpr int32_t kLayers = 32;
constexpr double kSigma = 2.0, kHardShare = 0.1;

struct TraceGen {
  std::mt19937 rng;
  int64_t t = 0;
  int32_t next() {
    const double mean =
        20.0 + 6.0 * std::sin(2.0 * std::numbers::pi * static_cast<double>(t++) / 3000.0);
    if (std::uniform_real_distribution<double>(0, 1)(rng) < kHardShare) return kLayers - 1;
    const double l = std::round(std::normal_distribution<double>(mean, kSigma)(rng));
    return static_cast<int32_t>(std::clamp(l, 0.0, kLayers - 1.0));
  }
};

struct TraceStats {
  double avg_predictor_layers = 0;  // per token, the active set less the final layer
  double coverage = 0;              // early true exits that fell in the active set
  double chance = 0;                // the same for a random set of the same size
  double avg_layers_run = 0;        // layers executed per token (perfect predictors)
  double oracle_layers = 0;         // layers executed exiting at the true exit
};

// Runs the schedule over `n` tokens: a perfect predictor fires at every active layer at or
// beyond the token's true exit, so the pass ends at next_active(true exit), which is recorded.
TraceStats run_trace(ExitLayerSchedule& s, TraceGen& gen, int n, bool online) {
  TraceStats st;
  int early = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t e = gen.next();
    st.avg_predictor_layers += s.num_predictor_layers();
    if (e < kLayers - 1) {
      ++early;
      st.coverage += s.active(e) ? 1 : 0;
      st.chance += static_cast<double>(s.num_predictor_layers()) / (kLayers - 1);
    }
    const int32_t ended = s.next_active(e);
    st.avg_layers_run += ended + 1;
    st.oracle_layers += e + 1;
    if (online) s.record(ended);
  }
  st.avg_predictor_layers /= n;
  st.coverage /= early;
  st.chance /= early;
  st.avg_layers_run /= n;
  st.oracle_layers /= n;
  return st;
}

TEST(ExitLayerScheduleTest, SyntheticThirtyTwoLayerTrace) {
  ExitScheduleConfig cfg;  // the paper's: 32 layers, top 8 offline, last 5 exits ± 2
  // Offline level: a calibration run with predictors everywhere sees the true exits.
  TraceGen calib{std::mt19937(3)};
  std::vector<int64_t> hist(kLayers, 0);
  for (int i = 0; i < 3000; ++i) ++hist[static_cast<size_t>(calib.next())];
  Result<std::vector<int32_t>> offline = rank_exit_layers(hist, kLayers, cfg.offline_top_k);
  ASSERT_TRUE(offline.ok());
  ASSERT_EQ(offline->size(), static_cast<size_t>(cfg.offline_top_k));

  constexpr int kTokens = 20000;
  ExitLayerSchedule two_level = make(cfg, *offline);
  ExitLayerSchedule offline_only = make(cfg, *offline);
  TraceGen g1{std::mt19937(5)}, g2{std::mt19937(5)};
  const TraceStats st = run_trace(two_level, g1, kTokens, /*online=*/true);
  const TraceStats off = run_trace(offline_only, g2, kTokens, /*online=*/false);
  std::printf(
      "[ SpecEE layer scheduling ] %d layers, %d tokens: avg active set %.2f predictor layers "
      "(offline only %.2f); true exits inside it %.1f %% (offline only %.1f %%, a random set of "
      "the same size %.1f %%); avg layers run %.2f (offline only %.2f, true exits %.2f)\n",
      kLayers, kTokens, st.avg_predictor_layers, off.avg_predictor_layers, 100 * st.coverage,
      100 * off.coverage, 100 * st.chance, st.avg_layers_run, off.avg_layers_run, st.oracle_layers);

  // The bounds follow from the configuration and the generator:
  // - the active set holds at most K + history · (2r + 1) predictor layers, and exits of one
  //   token stream cluster, so it stays under half the model;
  const int32_t cap = cfg.offline_top_k + cfg.history * (2 * cfg.radius + 1);
  EXPECT_LE(st.avg_predictor_layers, std::min<double>(cap, kLayers / 2.0));
  EXPECT_GE(st.avg_predictor_layers, cfg.offline_top_k);
  // - a window of ± r around one earlier exit from the same distribution covers a new one with
  //   P(|X − Y| ≤ r + ½), X − Y ~ N(0, 2σ²); the union of `history` windows does no worse
  //   (the drift over 5 tokens is negligible);
  const double one_window = std::erf((cfg.radius + 0.5) / (2.0 * kSigma));
  EXPECT_GE(st.coverage, one_window - 0.05);
  // - far above a random set of the same size, and above the offline set alone under drift.
  EXPECT_GE(st.coverage, 2.0 * st.chance);
  EXPECT_GT(st.coverage, off.coverage);
  // Perfect predictors on the active set run more layers than the true exits need, never fewer.
  EXPECT_GE(st.avg_layers_run, st.oracle_layers);
  EXPECT_LT(st.avg_layers_run, off.avg_layers_run);
}

}  // namespace
}  // namespace keel::engine
