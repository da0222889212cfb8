#include "sampling/logprobs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "sampling/rng.h"

namespace keel::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Direct (non-shifted) computation in long double, fine for moderate logits.
double direct_logprob(const std::vector<float>& logits, size_t idx) {
  long double sum = 0.0L;
  for (float x : logits) sum += std::exp(static_cast<long double>(x));
  return static_cast<double>(static_cast<long double>(logits[idx]) - std::log(sum));
}

std::vector<float> random_logits(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<float> logits(n);
  for (float& x : logits) x = static_cast<float>(rng.next_double() * 10.0 - 5.0);
  return logits;
}

TEST(LogprobsTest, KlDivergenceOfLogitRows) {
  const std::vector<float> p = {1.0f, 2.0f, 0.5f}, q = {0.0f, 2.5f, 0.5f};
  EXPECT_EQ(kl_divergence(p, p), 0.0);
  const std::vector<float> shifted = {11.0f, 12.0f, 10.5f};  // softmax is shift-invariant
  EXPECT_NEAR(kl_divergence(p, shifted), 0.0, 1e-12);
  double zp = 0, zq = 0;
  for (size_t i = 0; i < 3; ++i) {
    zp += std::exp(static_cast<double>(p[i]));
    zq += std::exp(static_cast<double>(q[i]));
  }
  double want = 0;
  for (size_t i = 0; i < 3; ++i) {
    const double pi = std::exp(static_cast<double>(p[i])) / zp;
    want += pi * std::log(pi / (std::exp(static_cast<double>(q[i])) / zq));
  }
  EXPECT_NEAR(kl_divergence(p, q), want, 1e-12);
  EXPECT_GT(kl_divergence(p, q), 0.01);
}

TEST(LogprobsTest, MatchesDirectComputation) {
  const auto logits = random_logits(1000, 3);
  const Logprobs lp = compute_logprobs(logits, 17, 20);
  EXPECT_EQ(lp.chosen.id, 17);
  EXPECT_NEAR(lp.chosen.logprob, direct_logprob(logits, 17), 1e-5);
  ASSERT_EQ(lp.top.size(), 20u);
  for (const TokenLogprob& t : lp.top) {
    EXPECT_NEAR(t.logprob, direct_logprob(logits, static_cast<size_t>(t.id)), 1e-5);
  }
}

TEST(LogprobsTest, TopIsTheSortedMostLikely) {
  const auto logits = random_logits(5000, 4);
  const Logprobs lp = compute_logprobs(logits, 0, 20);
  std::vector<size_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  ASSERT_EQ(lp.top.size(), 20u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(lp.top[i].id, static_cast<int32_t>(order[i]));
    if (i > 0) {
      EXPECT_GE(lp.top[i - 1].logprob, lp.top[i].logprob);
    }
  }
  // Rank of the chosen token: 1 + number of strictly larger logits.
  const auto pos = std::find(order.begin(), order.end(), 0u) - order.begin();
  EXPECT_EQ(lp.chosen_rank, pos + 1);
}

TEST(LogprobsTest, ProbabilitiesSumToAtMostOne) {
  const auto logits = random_logits(64, 5);
  double top_sum = 0.0;
  for (const auto& t : compute_logprobs(logits, 1, 20).top) top_sum += std::exp(t.logprob);
  EXPECT_LE(top_sum, 1.0 + 1e-6);
  EXPECT_GT(top_sum, 0.0);
  // All 64 tokens: the probabilities sum to one.
  double all_sum = 0.0;
  for (const auto& t : compute_logprobs(logits, 1, 64).top) all_sum += std::exp(t.logprob);
  EXPECT_NEAR(all_sum, 1.0, 1e-5);
}

TEST(LogprobsTest, StableForHugeLogits) {
  const std::vector<float> logits = {1000.0f, 999.0f, -1000.0f};
  const Logprobs lp = compute_logprobs(logits, 1, 3);
  const double expected1 = -std::log1p(std::exp(1.0));  // log(e^-1 / (1 + e^-1))
  EXPECT_NEAR(lp.chosen.logprob, expected1, 1e-5);
  EXPECT_NEAR(lp.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-5);
  EXPECT_TRUE(std::isfinite(lp.top[2].logprob));
  EXPECT_LT(lp.top[2].logprob, -1999.0f);
  EXPECT_NEAR(log_sum_exp(logits), 1000.0 + std::log1p(std::exp(-1.0)), 1e-4);
}

TEST(LogprobsTest, TiesGoToLowerIdAndTopNClamps) {
  const std::vector<float> logits = {0.0f, 1.0f, 1.0f, 0.5f};
  const Logprobs lp = compute_logprobs(logits, 2, 10);
  ASSERT_EQ(lp.top.size(), 4u);
  EXPECT_EQ(lp.top[0].id, 1);
  EXPECT_EQ(lp.top[1].id, 2);
  EXPECT_EQ(lp.top[2].id, 3);
  EXPECT_EQ(lp.top[3].id, 0);
  EXPECT_EQ(lp.chosen_rank, 1);  // tied with the best: nothing strictly better
  EXPECT_TRUE(compute_logprobs(logits, 2, 0).top.empty());
}

TEST(LogprobsTest, LargeTopNUsesSelectionPathConsistently) {
  const auto logits = random_logits(3000, 6);
  const Logprobs small = compute_logprobs(logits, 9, 20);
  const Logprobs large = compute_logprobs(logits, 9, 100);
  ASSERT_EQ(large.top.size(), 100u);
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(small.top[i].id, large.top[i].id);
    EXPECT_EQ(small.top[i].logprob, large.top[i].logprob);
  }
  EXPECT_EQ(small.chosen.logprob, large.chosen.logprob);
}

TEST(LogprobsTest, HandlesMinusInfinityNaNAndPlusInfinity) {
  const std::vector<float> banned = {-kInf, 2.0f, std::nanf(""), 2.0f};
  const Logprobs lp = compute_logprobs(banned, 0, 4);
  EXPECT_EQ(lp.chosen.logprob, -kInf);
  EXPECT_NEAR(lp.top[0].logprob, std::log(0.5), 1e-6);
  EXPECT_NEAR(lp.top[1].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(lp.top[2].logprob, -kInf);

  const std::vector<float> all_banned = {-kInf, -kInf};
  EXPECT_EQ(compute_logprobs(all_banned, 1, 1).chosen.logprob, -kInf);

  const std::vector<float> infinite = {kInf, 1.0f, kInf};
  const Logprobs inf_lp = compute_logprobs(infinite, 2, 3);
  EXPECT_NEAR(inf_lp.chosen.logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(inf_lp.top[2].logprob, -kInf);
}

}  // namespace
}  // namespace keel::sampling
