// Draft verification (sampling/draft_verify.h) over synthetic distributions, no model: greedy
// acceptance stops at the first draft that is not the argmax; verification emits exactly the
// tokens sequential sampling emits for the same seed (penalties, truncation, seeded draws); and a
// chi-square test — 20k seeded samples of the next 2 tokens at temperature 1, with and without
// speculation, each against the exact joint distribution, p > 0.001 — plus the acceptance rate
// of a draft against its target probability.
#include "sampling/draft_verify.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace keel::sampling {
namespace {

constexpr int32_t kVocab = 6;
using Row = std::vector<float>;

// The synthetic "model": logits of the first token, and of the second given the first.
Row first_logits() { return {0.3f, 1.2f, -0.4f, 0.9f, 0.0f, -1.5f}; }
Row second_logits(int32_t first) {
  Row r(kVocab);
  for (int32_t t = 0; t < kVocab; ++t) {
    r[static_cast<size_t>(t)] =
        0.5f * static_cast<float>((t * 7 + first * 3) % 5) - 0.2f * static_cast<float>(t == first);
  }
  return r;
}
std::vector<double> softmax(const Row& logits) {
  double total = 0;
  std::vector<double> p(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(double{logits[i]});
  for (double& x : p) x /= total;
  return p;
}

SamplingParams params_with_seed(uint64_t seed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  return p;
}

// The first two tokens with drafts {d0, d1}: one verification (rows: first, second given d0, a
// third row that is never reached unless both are accepted), then, if d0 was rejected, an
// ordinary sample of the second token given the first — what the engine's next step does.
std::pair<int32_t, int32_t> speculative_pair(uint64_t seed, int32_t d0, int32_t d1,
                                             int32_t* accepted) {
  Sampler s(params_with_seed(seed), kVocab);
  Row rows = first_logits();
  const Row r2 = second_logits(d0);
  rows.insert(rows.end(), r2.begin(), r2.end());
  rows.insert(rows.end(), kVocab, 0.0f);
  std::vector<SampleOutput> out;
  const int32_t drafts[] = {d0, d1};
  *accepted = verify_drafts(s, rows, drafts, &out);
  if (out.size() >= 2) return {out[0].token, out[1].token};
  Row second = second_logits(out[0].token);
  const int32_t t = s.sample(second);
  return {out[0].token, t};
}

std::pair<int32_t, int32_t> sequential_pair(uint64_t seed) {
  Sampler s(params_with_seed(seed), kVocab);
  Row first = first_logits();
  const int32_t a = s.sample(first);
  s.accept(a);
  Row second = second_logits(a);
  return {a, s.sample(second)};
}

// Upper tail of the chi-square distribution (Wilson–Hilferty normal approximation; accurate to
// well under 1e-3 in p for df ≥ 10).
double chi_square_p(double x, int df) {
  const double k = df;
  const double z = (std::cbrt(x / k) - (1 - 2 / (9 * k))) / std::sqrt(2 / (9 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// Pearson's statistic of `counts` (kVocab × kVocab) against the exact joint distribution.
double chi_square(const std::vector<int>& counts, int n) {
  const std::vector<double> p1 = softmax(first_logits());
  double x = 0;
  for (int32_t a = 0; a < kVocab; ++a) {
    const std::vector<double> p2 = softmax(second_logits(a));
    for (int32_t b = 0; b < kVocab; ++b) {
      const double expected = n * p1[static_cast<size_t>(a)] * p2[static_cast<size_t>(b)];
      const double d = counts[static_cast<size_t>(a * kVocab + b)] - expected;
      x += d * d / expected;
    }
  }
  return x;
}

TEST(DraftVerifyTest, GreedyAcceptsWhileDraftsAreTheArgmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler s(p, kVocab);
  // Row argmaxes: 3, 1, 4, 0.
  Row rows;
  for (int32_t best : {3, 1, 4, 0}) {
    Row r(kVocab, 0.0f);
    r[static_cast<size_t>(best)] = 2.0f;
    rows.insert(rows.end(), r.begin(), r.end());
  }
  std::vector<SampleOutput> out;
  const int32_t two_right[] = {3, 1, 5};  // the third draft is wrong: corrected to 4
  EXPECT_EQ(verify_drafts(s, rows, two_right, &out), 2);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].token, 3);
  EXPECT_EQ(out[1].token, 1);
  EXPECT_EQ(out[2].token, 4);
  EXPECT_EQ(s.draw_index(), 3u);
  EXPECT_EQ(s.history().output_count(4), 1);

  Sampler all(p, kVocab);
  out.clear();
  const int32_t all_right[] = {3, 1, 4};  // every draft accepted, then the bonus token
  EXPECT_EQ(verify_drafts(all, rows, all_right, &out), 3);
  ASSERT_EQ(out.size(), 4u);
  EXPECT_EQ(out[3].token, 0);

  Sampler none(p, kVocab);
  out.clear();
  const int32_t wrong_first[] = {2, 1, 4};
  EXPECT_EQ(verify_drafts(none, rows, wrong_first, &out), 0);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].token, 3);
}

// With penalties and truncation in play, verifying a draft run emits what sequential sampling
// emits for the same seed: each row sees the accepted drafts in the penalty history.
TEST(DraftVerifyTest, EmitsWhatSequentialSamplingEmits) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    SamplingParams p = params_with_seed(seed);
    p.top_k = 4;
    p.repetition_penalty = 1.3f;
    p.frequency_penalty = 0.4f;
    Sampler seq(p, kVocab), spec(p, kVocab);
    seq.set_prompt(std::vector<int32_t>{1, 3});
    spec.set_prompt(std::vector<int32_t>{1, 3});
    // Rows that do not depend on the context, so both runs see the same logits.
    const Row rows_one[] = {first_logits(), second_logits(1), second_logits(4)};
    std::vector<int32_t> expected;
    for (const Row& r : rows_one) {
      Row copy = r;
      expected.push_back(seq.sample(copy));
      seq.accept(expected.back());
    }
    Row rows;
    for (const Row& r : rows_one) rows.insert(rows.end(), r.begin(), r.end());
    std::vector<SampleOutput> out;
    const int32_t drafts[] = {expected[0], expected[1]};  // the right drafts: all accepted
    ASSERT_EQ(verify_drafts(spec, rows, drafts, &out), 2) << "seed " << seed;
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out[i].token, expected[i]) << "seed " << seed;
  }
}

TEST(DraftVerifyTest, KeepsTheJointDistributionOfTwoTokens) {
  constexpr int kSamples = 20000;
  std::vector<int> spec_counts(kVocab * kVocab), seq_counts(kVocab * kVocab);
  int accepted_first = 0, identical = 0;
  for (int i = 0; i < kSamples; ++i) {
    int32_t accepted = 0;
    // Different seeds for the two runs, so the two samples are independent.
    const auto [a, b] = speculative_pair(1000000 + i, /*d0=*/3, /*d1=*/0, &accepted);
    const auto [c, d] = sequential_pair(i);
    ++spec_counts[static_cast<size_t>(a * kVocab + b)];
    ++seq_counts[static_cast<size_t>(c * kVocab + d)];
    accepted_first += accepted >= 1;
    const auto same = sequential_pair(1000000 + i);
    identical += same.first == a && same.second == b;
  }
  const double x_spec = chi_square(spec_counts, kSamples);
  const double x_seq = chi_square(seq_counts, kSamples);
  const int df = kVocab * kVocab - 1;
  EXPECT_GT(chi_square_p(x_spec, df), 0.001) << "chi-square " << x_spec;
  EXPECT_GT(chi_square_p(x_seq, df), 0.001) << "chi-square " << x_seq;
  // The draft 3 is accepted with its target probability (binomial: 5 sigma ≈ 0.017).
  const double p3 = softmax(first_logits())[3];
  EXPECT_NEAR(static_cast<double>(accepted_first) / kSamples, p3, 0.017);
  // Seeded draws: the very tokens sequential sampling gives for the same seed.
  EXPECT_EQ(identical, kSamples);
}

// The chi-square check can fail: a verifier that always kept the draft would be far off.
TEST(DraftVerifyTest, ChiSquareRejectsAWrongDistribution) {
  std::vector<int> counts(kVocab * kVocab);
  for (int i = 0; i < 20000; ++i) {
    const auto [a, b] = sequential_pair(i);
    ++counts[static_cast<size_t>(3 * kVocab + b)];  // first token forced to the draft
    (void)a;
  }
  EXPECT_LT(chi_square_p(chi_square(counts, 20000), kVocab * kVocab - 1), 0.001);
}

}  // namespace
}  // namespace keel::sampling
