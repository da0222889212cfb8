// SLO counts from histogram snapshots: the difference of two cumulative snapshots, counted at the
// largest bucket bound at or below the objective; a reset or re-bucketed histogram counts from 0.
#include "cluster/policy/slo_count.h"

#include <gtest/gtest.h>

namespace keel::cluster::autoscale {
namespace {

engine::HistogramSnapshot hist(std::vector<uint64_t> cumulative) {
  engine::HistogramSnapshot h;
  h.bounds = {0.1, 0.5, 1.0};
  h.count = cumulative.back();
  h.cumulative = std::move(cumulative);
  return h;
}

TEST(SloCount, CountsTheNewObservationsWithinTheObjective) {
  const SloCount c = count_within(hist({1, 2, 3, 4}), hist({3, 6, 8, 10}), 0.5);
  EXPECT_EQ(c.total, 6);
  EXPECT_EQ(c.met, 4);  // ≤ 0.5: 6 - 2
}

TEST(SloCount, AnObjectiveBetweenBoundsCountsAtTheLowerBound) {
  const SloCount c = count_within(hist({0, 0, 0, 0}), hist({2, 5, 7, 7}), 0.75);
  EXPECT_EQ(c.met, 5);
  EXPECT_EQ(c.total, 7);
  EXPECT_EQ(count_within(hist({0, 0, 0, 0}), hist({2, 5, 7, 7}), 0.05).met, 0);
  EXPECT_EQ(count_within(hist({0, 0, 0, 0}), hist({2, 5, 7, 9}), 100).met, 7)
      << "+Inf is no bound: above the last one is a miss";
}

TEST(SloCount, AResetHistogramCountsFromZero) {
  const SloCount c = count_within(hist({5, 5, 5, 9}), hist({1, 1, 2, 2}), 0.5);
  EXPECT_EQ(c.total, 2);
  EXPECT_EQ(c.met, 1);
  engine::HistogramSnapshot other = hist({1, 1, 1, 1});
  other.bounds = {0.2, 0.4, 0.8};
  EXPECT_EQ(count_within(other, hist({1, 2, 3, 3}), 0.5).total, 3);
  EXPECT_EQ(count_within(engine::HistogramSnapshot{}, hist({1, 2, 3, 3}), 0.5).met, 2);
}

}  // namespace
}  // namespace keel::cluster::autoscale
