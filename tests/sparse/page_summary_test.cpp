// PageSummary min/max folding and Quest's upper bound: the bound is never below the true q·k of
// any key in the page (random pages, GQA grouping), equals it for a one-key page, and is -inf for
// an empty page.
#include "sparse/page_summary.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace keel::sparse {
namespace {

TEST(PageSummaryTest, MinMaxAndCount) {
  PageSummary p;
  const std::vector<float> a = {1, -2, 3}, b = {-1, 5, 2};
  p.add_key(a);
  p.add_key(b);
  EXPECT_EQ(p.num_tokens, 2);
  EXPECT_EQ(p.k_min, (std::vector<float>{-1, -2, 2}));
  EXPECT_EQ(p.k_max, (std::vector<float>{1, 5, 3}));
}

TEST(PageSummaryTest, QuestBoundIsAnUpperBoundAndTightForOneKey) {
  const QueryShape shape{.n_heads = 4, .n_kv_heads = 2, .head_dim = 8};
  std::mt19937 rng(7);
  std::normal_distribution<float> dist;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::vector<float>> keys(16, std::vector<float>(16));
    PageSummary page;
    for (auto& k : keys) {
      for (float& v : k) v = dist(rng);
      page.add_key(k);
    }
    std::vector<float> q(32);
    for (float& v : q) v = dist(rng);
    float best = -INFINITY;
    for (const auto& k : keys) {
      for (int h = 0; h < 4; ++h) {
        float dot = 0;
        for (int c = 0; c < 8; ++c)
          dot += q[static_cast<size_t>(h * 8 + c)] * k[static_cast<size_t>((h / 2) * 8 + c)];
        best = std::max(best, dot);
      }
    }
    EXPECT_GE(quest_upper_bound(page, q, shape), best - 1e-4f);
    PageSummary one;
    one.add_key(keys[0]);
    float one_best = -INFINITY;
    for (int h = 0; h < 4; ++h) {
      float dot = 0;
      for (int c = 0; c < 8; ++c)
        dot += q[static_cast<size_t>(h * 8 + c)] * keys[0][static_cast<size_t>((h / 2) * 8 + c)];
      one_best = std::max(one_best, dot);
    }
    EXPECT_NEAR(quest_upper_bound(one, q, shape), one_best, 1e-4f);
  }
  EXPECT_TRUE(std::isinf(quest_upper_bound(PageSummary{}, std::vector<float>(32), shape)));
}

}  // namespace
}  // namespace keel::sparse
