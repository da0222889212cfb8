// Arrival schedule statistics for fixed seeds: exponential gaps with mean 1/rate and coefficient
// of variation 1 (Poisson), Gamma gaps with CV 1/sqrt(burstiness), the total scaled to N/rate,
// monotonic offsets, reproducibility, and an infinite rate sending everything at once.
#include "loadgen/arrivals.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

namespace keel::loadgen {
namespace {

struct Moments {
  double mean, cv;
};
Moments moments(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
  double var = 0.0;
  for (double x : v) var += (x - mean) * (x - mean);
  return {mean, std::sqrt(var / n) / mean};
}

TEST(ArrivalsTest, PoissonGapsHaveMeanOneOverRateAndUnitCv) {
  for (uint64_t seed : {0u, 1u, 42u}) {
    auto gaps = sample_interarrival_gaps(20000, 4.0, 1.0, seed);
    ASSERT_EQ(gaps.size(), 20000u);
    auto m = moments(gaps);
    EXPECT_NEAR(m.mean, 0.25, 0.25 * 0.03) << "seed " << seed;  // ~4 standard errors
    EXPECT_NEAR(m.cv, 1.0, 0.04) << "seed " << seed;
    for (double g : gaps) EXPECT_GE(g, 0.0);
  }
}

TEST(ArrivalsTest, GammaBurstinessSetsTheVariability) {
  for (double k : {0.25, 4.0}) {
    auto m = moments(sample_interarrival_gaps(20000, 2.0, k, 9));
    EXPECT_NEAR(m.mean, 0.5, 0.5 * 0.05) << "burstiness " << k;
    EXPECT_NEAR(m.cv, 1.0 / std::sqrt(k), 0.08 / std::sqrt(k)) << "burstiness " << k;
  }
}

TEST(ArrivalsTest, ScheduleIsMonotonicAndEndsAtNOverRate) {
  auto t = arrival_schedule(500, 10.0, 1.0, 5);
  ASSERT_EQ(t.size(), 500u);
  EXPECT_GT(t.front(), 0.0);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_GE(t[i], t[i - 1]);
  EXPECT_NEAR(t.back(), 50.0, 1e-9);
}

TEST(ArrivalsTest, SameSeedSameScheduleOtherSeedDiffers) {
  EXPECT_EQ(arrival_schedule(50, 3.0, 1.0, 11), arrival_schedule(50, 3.0, 1.0, 11));
  EXPECT_NE(arrival_schedule(50, 3.0, 1.0, 11), arrival_schedule(50, 3.0, 1.0, 12));
}

TEST(ArrivalsTest, InfiniteRateSendsEverythingAtZero) {
  auto t = arrival_schedule(7, std::numeric_limits<double>::infinity(), 1.0, 0);
  EXPECT_EQ(t, std::vector<double>(7, 0.0));
  EXPECT_TRUE(arrival_schedule(0, 1.0, 1.0, 0).empty());
}

}  // namespace
}  // namespace keel::loadgen
