// SemiPdWindow → WindowObservation: percentiles of the samples (empty without samples), λ and l₁
// from the window's counters, and the split's stability.
#include "engine/semi_pd_window_stats.h"

#include <gtest/gtest.h>

namespace keel::engine {
namespace {

TEST(SemiPdWindowStatsTest, PercentileInterpolatesBetweenRanks) {
  EXPECT_FALSE(sample_percentile({}, 90).has_value());
  EXPECT_DOUBLE_EQ(*sample_percentile({0.5}, 90), 0.5);
  // Unsorted input; 90th of {1..10}: rank 8.1 → 9 + 0.1 · (10 − 9).
  const std::vector<double> v = {10, 3, 1, 7, 2, 9, 4, 8, 6, 5};
  EXPECT_DOUBLE_EQ(*sample_percentile(v, 90), 9.1);
  EXPECT_DOUBLE_EQ(*sample_percentile(v, 50), 5.5);
  EXPECT_DOUBLE_EQ(*sample_percentile(v, 100), 10.0);
}

TEST(SemiPdWindowStatsTest, ObservationCarriesSplitRatesAndPercentiles) {
  SemiPdWindow w;
  w.split = {3, 2};
  w.ttft_seconds = {0.1, 0.2, 0.3, 0.4, 0.5};
  w.tpot_seconds = {0.01, 0.03};
  w.num_arrivals = 8;
  w.num_prefills = 5;
  w.prefill_busy_core_s = 1.5;
  w.duration_s = 2.0;
  const WindowObservation o = window_observation(w, 50);
  EXPECT_EQ(o.x, 3);
  EXPECT_EQ(o.y, 2);
  EXPECT_TRUE(o.split_stable);
  ASSERT_TRUE(o.ttft_s.has_value());
  EXPECT_DOUBLE_EQ(*o.ttft_s, 0.3);
  ASSERT_TRUE(o.tpot_s.has_value());
  EXPECT_DOUBLE_EQ(*o.tpot_s, 0.02);
  EXPECT_DOUBLE_EQ(o.arrival_rate, 4.0);    // 8 arrivals / 2 s
  EXPECT_DOUBLE_EQ(o.prefill_core_s, 0.3);  // 1.5 core-s / 5 prefills
  EXPECT_DOUBLE_EQ(lambda_prime(o.arrival_rate, o.prefill_core_s), 1.2);
}

TEST(SemiPdWindowStatsTest, EmptyWindowHasNoLatenciesAndNoLoad) {
  SemiPdWindow w;
  w.split = {1, 1};
  w.split_changed = true;
  w.num_arrivals = 3;  // a zero-length window: no rate
  const WindowObservation o = window_observation(w, 90);
  EXPECT_FALSE(o.split_stable);
  EXPECT_FALSE(o.ttft_s.has_value());
  EXPECT_FALSE(o.tpot_s.has_value());
  EXPECT_EQ(o.arrival_rate, 0.0);
  EXPECT_EQ(o.prefill_core_s, 0.0);
}

}  // namespace
}  // namespace keel::engine
