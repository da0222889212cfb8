#include "sampling/truncation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "sampling/rng.h"
#include "sampling/softmax_math.h"

namespace keel::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Logits whose softmax is exactly proportional to `probs`.
std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::set<int32_t> survivors(const std::vector<float>& logits) {
  std::set<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf) ids.insert(static_cast<int32_t>(i));
  }
  return ids;
}

std::set<int32_t> run(std::vector<float> logits, TruncationParams params) {
  const float max_logit = prepare_logits(logits, 1.0f);
  std::vector<float> weights(logits.size());
  compute_weights(logits, max_logit, weights);
  Truncator truncator;
  const bool listed = truncator.apply(logits, weights, max_logit, params);
  const std::set<int32_t> kept = survivors(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kNegInf) {
      EXPECT_EQ(weights[i], 0.0f) << "removed token keeps a weight";
    }
  }
  if (listed) {
    std::set<int32_t> from_list;
    for (const Candidate& c : truncator.survivors()) from_list.insert(c.token_id);
    EXPECT_EQ(from_list, kept) << "survivor list and masked logits disagree";
    EXPECT_TRUE(
        std::is_sorted(truncator.survivors().begin(), truncator.survivors().end(), ranks_before));
  }
  return kept;
}

// Probabilities 0.05, 0.5, 0.1, 0.2, 0.15 on ids 0..4 (sorted order: 1, 3, 4, 2, 0).
const std::vector<double> kProbs = {0.05, 0.5, 0.1, 0.2, 0.15};

TEST(TruncationTest, TopPKeepsSmallestSetReachingP) {
  const auto logits = logits_of(kProbs);
  EXPECT_EQ(run(logits, {0, 0.3f, 0.0f}), (std::set<int32_t>{1}));
  EXPECT_EQ(run(logits, {0, 0.69f, 0.0f}), (std::set<int32_t>{1, 3}));
  EXPECT_EQ(run(logits, {0, 0.71f, 0.0f}), (std::set<int32_t>{1, 3, 4}));
  EXPECT_EQ(run(logits, {0, 0.86f, 0.0f}), (std::set<int32_t>{1, 3, 4, 2}));
  EXPECT_EQ(run(logits, {0, 0.96f, 0.0f}), (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run(logits, {0, 1e-6f, 0.0f}), (std::set<int32_t>{1}));  // never empty
}

TEST(TruncationTest, TopKKeepsKBestWithTiesToLowerId) {
  const auto logits = logits_of(kProbs);
  EXPECT_EQ(run(logits, {1, 1.0f, 0.0f}), (std::set<int32_t>{1}));
  EXPECT_EQ(run(logits, {3, 1.0f, 0.0f}), (std::set<int32_t>{1, 3, 4}));
  EXPECT_EQ(run(logits, {5, 1.0f, 0.0f}), (std::set<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run(logits, {50, 1.0f, 0.0f}), (std::set<int32_t>{0, 1, 2, 3, 4}));
  const std::vector<float> tied = {1.0f, 2.0f, 2.0f, 2.0f, 0.0f};
  EXPECT_EQ(run(tied, {2, 1.0f, 0.0f}), (std::set<int32_t>{1, 2}));
}

TEST(TruncationTest, TopPRenormalisesOverTopK) {
  // Top-2 = {1 (0.5), 3 (0.2)}; renormalised: 0.714, 0.286. top_p 0.65 keeps only id 1, which
  // would not happen without renormalisation (0.5 < 0.65 of the full mass).
  const auto logits = logits_of(kProbs);
  EXPECT_EQ(run(logits, {2, 0.65f, 0.0f}), (std::set<int32_t>{1}));
  EXPECT_EQ(run(logits, {0, 0.65f, 0.0f}), (std::set<int32_t>{1, 3}));
}

TEST(TruncationTest, MinPDropsTokensBelowFractionOfMax) {
  const auto logits = logits_of(kProbs);
  // p_max = 0.5: min_p 0.35 → floor 0.175 keeps 0.5, 0.2.
  EXPECT_EQ(run(logits, {0, 1.0f, 0.35f}), (std::set<int32_t>{1, 3}));
  // floor 0.25 * 0.5 = 0.125 keeps 0.5, 0.2, 0.15.
  EXPECT_EQ(run(logits, {0, 1.0f, 0.25f}), (std::set<int32_t>{1, 3, 4}));
  EXPECT_EQ(run(logits, {0, 1.0f, 1.0f}), (std::set<int32_t>{1}));
  EXPECT_EQ(run(logits, {0, 1.0f, 0.05f}).size(), 5u);
  // Combined with top-k (list path) the same floor applies.
  EXPECT_EQ(run(logits, {4, 1.0f, 0.35f}), (std::set<int32_t>{1, 3}));
}

TEST(TruncationTest, DisabledStagesKeepEverythingFinite) {
  std::vector<float> logits = logits_of(kProbs);
  logits[2] = kNegInf;
  EXPECT_EQ(run(logits, {0, 1.0f, 0.0f}), (std::set<int32_t>{0, 1, 3, 4}));
  EXPECT_EQ(run(logits, {-1, 1.0f, 0.0f}), (std::set<int32_t>{0, 1, 3, 4}));
}

// Gaussian logits from keel's own Rng (Box-Muller), so the data is the same everywhere.
std::vector<float> random_logits(size_t n, uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> logits(n);
  for (float& x : logits) {
    const double u1 = 1.0 - rng.next_double();
    const double u2 = rng.next_double();
    x = static_cast<float>(scale * std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307 * u2));
  }
  return logits;
}

// Straightforward reference: full sort, then each stage by its definition.
std::set<int32_t> reference(const std::vector<float>& logits, TruncationParams p) {
  std::vector<Candidate> all;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != kNegInf) all.push_back({logits[i], static_cast<int32_t>(i)});
  }
  std::sort(all.begin(), all.end(), ranks_before);
  const float max_logit = all.front().logit;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < all.size()) all.resize(p.top_k);
  if (p.top_p < 1.0f) {
    double total = 0.0;
    for (const auto& c : all) total += std::exp(c.logit - max_logit);
    double cumulative = 0.0;
    size_t keep = all.size();
    for (size_t i = 0; i < all.size(); ++i) {
      cumulative += std::exp(all[i].logit - max_logit);
      if (cumulative >= p.top_p * total) {
        keep = i + 1;
        break;
      }
    }
    all.resize(keep);
  }
  std::set<int32_t> ids;
  for (const auto& c : all) {
    if (std::exp(static_cast<double>(c.logit) - max_logit) >= p.min_p * (1.0 - 1e-6)) {
      ids.insert(c.token_id);
    }
  }
  return ids;
}

TEST(TruncationTest, MatchesFullSortReferenceOnLargeVocabulary) {
  constexpr size_t kVocab = 152064;
  struct Case {
    TruncationParams params;
    double scale;
  };
  const std::vector<Case> cases = {
      {{0, 0.9f, 0.0f}, 1.0},    // flat: nucleus of ~100k tokens (many growth rounds)
      {{0, 0.9f, 0.0f}, 4.0},    // peaked: nucleus of hundreds
      {{0, 0.5f, 0.0f}, 6.0},    // very peaked: nucleus inside the first prefix
      {{40, 0.95f, 0.0f}, 3.0},  // top-k then top-p
      {{1000, 1.0f, 0.0f}, 2.0}, {{0, 0.8f, 0.01f}, 3.0}, {{0, 1.0f, 0.001f}, 3.0},
  };
  uint64_t seed = 1;
  for (const Case& c : cases) {
    const auto logits = random_logits(kVocab, seed++, c.scale);
    const auto kept = run(logits, c.params);
    const auto expected = reference(logits, c.params);
    EXPECT_EQ(kept.size(), expected.size()) << "scale " << c.scale << " top_p " << c.params.top_p;
    EXPECT_TRUE(kept == expected) << "scale " << c.scale << " top_k " << c.params.top_k;
  }
}

TEST(TruncationTest, SurvivorListIsInRanksBeforeOrder) {
  // Survivors come back in ranks_before order, a strict total order: the result is unique.
  std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  std::vector<float> weights(logits.size());
  compute_weights(logits, 3.0f, weights);
  Truncator truncator;
  ASSERT_TRUE(truncator.apply(logits, weights, 3.0f, {4, 1.0f, 0.0f}));
  const auto s = truncator.survivors();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].token_id, 1);
  EXPECT_EQ(s[1].token_id, 2);
  EXPECT_EQ(s[2].token_id, 4);
  EXPECT_EQ(s[3].token_id, 3);
  EXPECT_EQ(logits[0], kNegInf);
  EXPECT_EQ(weights[0], 0.0f);
  EXPECT_EQ(logits[3], 2.0f);
}

TEST(TruncationTest, ManyTokensInOneBucket) {
  // 10000 logits within 1/32 of each other share the boundary bucket: it alone is sorted.
  std::vector<float> logits(10000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = 1.0f - static_cast<float>(i % 97) * 1e-4f;
  const auto k = run(logits, {150, 1.0f, 0.0f});
  const auto expected = reference(logits, {150, 1.0f, 0.0f});
  EXPECT_EQ(k, expected);
  EXPECT_EQ(run(logits, {0, 0.3f, 0.0f}), reference(logits, {0, 0.3f, 0.0f}));
}

TEST(TruncationTest, TopKLargerThanFiniteCountIsNoOp) {
  std::vector<float> logits = {1.0f, kNegInf, 0.0f, kNegInf};
  EXPECT_EQ(run(logits, {3, 1.0f, 0.0f}), (std::set<int32_t>{0, 2}));
  // top-k is then skipped, and top-p runs on its own (over all finite tokens).
  const auto probs = logits_of(kProbs);
  std::vector<float> padded(probs.begin(), probs.end());
  padded.resize(20, kNegInf);
  Truncator truncator;  // reused across calls, as in a Sampler
  for (int repeat = 0; repeat < 2; ++repeat) {
    std::vector<float> l = padded;
    std::vector<float> w(l.size());
    const float max_logit = prepare_logits(l, 1.0f);
    compute_weights(l, max_logit, w);
    EXPECT_FALSE(truncator.apply(l, w, max_logit, {10, 0.69f, 0.0f}));
    EXPECT_EQ(survivors(l), (std::set<int32_t>{1, 3}));
    std::vector<float> l2 = padded;
    compute_weights(l2, max_logit, w);
    EXPECT_TRUE(truncator.apply(l2, w, max_logit, {2, 1.0f, 0.0f}));
  }
}

}  // namespace
}  // namespace keel::sampling
