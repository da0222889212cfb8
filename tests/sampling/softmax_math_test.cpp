#include "sampling/softmax_math.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "sampling/rng.h"

namespace keel::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(ExpNonpositiveTest, MatchesLibmWithinOneMillionth) {
  double worst = 0.0;
  for (int i = 0; i <= 860000; ++i) {
    const float x = -static_cast<float>(i) * 1e-4f;
    const double expected = std::exp(static_cast<double>(x));
    const double rel = std::abs(exp_nonpositive(x) - expected) / expected;
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 1e-6);
  // Points near the range-reduction boundaries (x = (n + 1/2) ln 2).
  for (int n = 0; n < 124; ++n) {
    const float x = -(static_cast<float>(n) + 0.5f) * 0.69314718f;
    EXPECT_NEAR(exp_nonpositive(x) / std::exp(static_cast<double>(x)), 1.0, 1e-6) << x;
  }
}

TEST(ExpNonpositiveTest, EdgeValues) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-kInf), 0.0f);
  EXPECT_EQ(exp_nonpositive(std::nanf("")), 0.0f);
  EXPECT_EQ(exp_nonpositive(kExpCutoff - 0.01f), 0.0f);
  const float at_cutoff = exp_nonpositive(kExpCutoff);
  EXPECT_GT(at_cutoff, 0.0f);
  EXPECT_TRUE(std::isnormal(at_cutoff));
}

TEST(PrepareLogitsTest, DividesByTemperatureSanitizesNaNAndReturnsMax) {
  std::vector<float> logits = {2.0f, -1.0f, std::nanf(""), -kInf, 3.0f};
  EXPECT_FLOAT_EQ(prepare_logits(logits, 0.5f), 6.0f);
  EXPECT_FLOAT_EQ(logits[0], 4.0f);
  EXPECT_FLOAT_EQ(logits[1], -2.0f);
  EXPECT_EQ(logits[2], -kInf);
  EXPECT_EQ(logits[3], -kInf);
  std::vector<float> same = {1.5f, std::nanf("")};
  EXPECT_FLOAT_EQ(prepare_logits(same, 1.0f), 1.5f);
  EXPECT_EQ(same[1], -kInf);
  std::vector<float> banned = {-kInf, std::nanf("")};
  EXPECT_EQ(prepare_logits(banned, 1.0f), -kInf);
}

TEST(WeightBlocksTest, SumsAndPicksConsistently) {
  Rng rng(21);
  std::vector<float> weights(5000);
  for (float& w : weights) w = static_cast<float>(rng.next_double());
  weights[1234] = 0.0f;
  std::vector<double> blocks((weights.size() + kWeightBlockSize - 1) / kWeightBlockSize);
  const double total = sum_weight_blocks(weights, blocks);
  double direct = 0.0;
  for (float w : weights) direct += w;
  EXPECT_NEAR(total, direct, 1e-9 * direct);
  // pick_weighted(target) is the first index whose prefix sum exceeds target.
  for (double fraction : {0.0, 0.1, 0.2468, 0.5, 0.75, 0.999999}) {
    const double target = fraction * total;
    double prefix = 0.0;
    size_t expected = 0;
    for (; expected < weights.size(); ++expected) {
      prefix += weights[expected];
      if (prefix > target) break;
    }
    EXPECT_EQ(pick_weighted(weights, blocks, target), static_cast<int32_t>(expected)) << fraction;
  }
  // Zero weights are never picked, even for target 0.
  std::vector<float> sparse(3000, 0.0f);
  sparse[2500] = 0.25f;
  std::vector<double> sparse_blocks(3);
  const double sparse_total = sum_weight_blocks(sparse, sparse_blocks);
  EXPECT_EQ(pick_weighted(sparse, sparse_blocks, 0.0), 2500);
  EXPECT_EQ(pick_weighted(sparse, sparse_blocks, sparse_total * 0.9999999), 2500);
}

TEST(ArgmaxTest, PicksLargestWithTiesToLowestId) {
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{1.0f, 3.0f, 3.0f, 0.0f}), 1);
  EXPECT_EQ(argmax(std::vector<float>{std::nanf(""), -5.0f, std::nanf("")}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, -kInf}), 0);
  EXPECT_EQ(argmax(std::vector<float>{-kInf, kInf, kInf}), 1);
}

}  // namespace
}  // namespace keel::sampling
