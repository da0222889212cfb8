// Speculative sampling with the draft head's drafts, and with a draft model's, keeps the target's
// distribution (the n-gram variant lives in tests/sampling/draft_verify_test.cpp): on stories260K
// after a fixed context, the head (or a Q8_0 copy of the model) drafts the next two tokens; 20k
// seeded samples of those two tokens at temperature 1 (top-k 4, so the joint has 16 cells) —
// verification of the drafts with the target's real logits, then an ordinary sample after a
// rejection, as the engine's next step does — pass a chi-square test against the exact joint (p >
// 0.001), and each seed gives the very tokens sequential sampling gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "draft/draft_model.h"
#include "draft/draft_model_runner.h"
#include "draft_test_util.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"
#include "quantized_copy.h"
#include "sampling/draft_verify.h"
#include "support/test_support.h"

namespace keel::draft {
namespace {

using Row = std::vector<float>;
constexpr int32_t kTopK = 4;

// Logits (and features) of the last position after running `tokens` from scratch.
struct Forward {
  Row logits;
  std::vector<Row> hidden;  // per position
};
Forward run(const model::Model& m, kernels::Ops& ops, const std::vector<int32_t>& tokens) {
  auto kv = model::KvStorage::create(model::KvLayout::for_model(m.hparams(), 16, DType::kF32), 4);
  EXPECT_TRUE(kv.ok());
  model::Context ctx(m, 64);
  model::Batch b;
  const int32_t seq = b.add_seq({0, 1, 2, 3});
  for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), seq, true);
  Row logits, hidden;
  EXPECT_TRUE(ctx.forward(b, *kv, ops, &logits, &hidden).ok());
  Forward f;
  const auto v = static_cast<size_t>(m.hparams().n_vocab);
  const auto d = static_cast<size_t>(m.hparams().n_embd);
  f.logits.assign(logits.end() - static_cast<ptrdiff_t>(v), logits.end());
  for (size_t i = 0; i < tokens.size(); ++i) {
    f.hidden.emplace_back(hidden.begin() + static_cast<ptrdiff_t>(i * d),
                          hidden.begin() + static_cast<ptrdiff_t>((i + 1) * d));
  }
  return f;
}

// The top-k-4 distribution of a row at temperature 1: token → probability.
std::map<int32_t, double> truncated(const Row& logits) {
  std::vector<int32_t> ids(logits.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::partial_sort(ids.begin(), ids.begin() + kTopK, ids.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  std::map<int32_t, double> p;
  double total = 0;
  for (int i = 0; i < kTopK; ++i) total += p[ids[i]] = std::exp(double{logits[ids[i]]});
  for (auto& [t, x] : p) x /= total;
  return p;
}

sampling::SamplingParams params(uint64_t seed) {
  sampling::SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = kTopK;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

double chi_square_p(double x, int df) {  // Wilson–Hilferty, as draft_verify_test.cpp
  const double k = df;
  const double z = (std::cbrt(x / k) - (1 - 2 / (9 * k))) / std::sqrt(2 / (9 * k));
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

// A context the model wrote itself (greedy after a short opening), where a good drafter is in its
// element: its first draft is among the likely next tokens.
std::vector<int32_t> greedy_context(const model::Model& m, kernels::Ops& ops) {
  std::vector<int32_t> context = {1, 403, 407};
  for (int i = 0; i < 8; ++i) {
    const Row l = run(m, ops, context).logits;
    context.push_back(static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin()));
  }
  return context;
}

// The sampling of the two tokens after `context` with `drafts` (two) verified, as described at
// the top, against the exact joint.
void expect_joint_distribution_kept(const model::Model& m, kernels::Ops& ops,
                                    const std::vector<int32_t>& context, const Row& base_logits,
                                    const std::vector<int32_t>& drafts) {
  ASSERT_EQ(drafts.size(), 2u);
  const auto p1 = truncated(base_logits);
  std::map<int32_t, Row> second;  // the row after context + a, for every a that can come first
  for (const auto& [a, p] : p1) {
    std::vector<int32_t> c = context;
    c.push_back(a);
    second[a] = run(m, ops, c).logits;
  }
  std::vector<int32_t> c = context;
  c.push_back(drafts[0]);
  const Row after_d0 = run(m, ops, c).logits;
  c.push_back(drafts[1]);
  const Row after_d1 = run(m, ops, c).logits;

  constexpr int kSamples = 20000;
  std::map<std::pair<int32_t, int32_t>, int> counts;
  int accepted_first = 0, identical = 0;
  for (int i = 0; i < kSamples; ++i) {
    sampling::Sampler spec(params(1000000 + i), static_cast<int32_t>(m.hparams().n_vocab));
    Row rows = base_logits;
    rows.insert(rows.end(), after_d0.begin(), after_d0.end());
    rows.insert(rows.end(), after_d1.begin(), after_d1.end());
    std::vector<sampling::SampleOutput> out;
    accepted_first += sampling::verify_drafts(spec, rows, drafts, &out) >= 1;
    int32_t a = out[0].token, b = 0;
    if (out.size() >= 2) {
      b = out[1].token;
    } else {
      Row r = second.at(a);
      b = spec.sample(r);
    }
    ++counts[{a, b}];
    sampling::Sampler seq(params(1000000 + i), static_cast<int32_t>(m.hparams().n_vocab));
    Row r1 = base_logits;
    const int32_t x = seq.sample(r1);
    seq.accept(x);
    Row r2 = second.at(x);
    identical += x == a && seq.sample(r2) == b;
  }
  // Pearson's statistic; cells expected fewer than 5 times are pooled into one.
  double x2 = 0, pooled_expected = 0;
  int pooled_count = 0, bins = 0;
  for (const auto& [a, pa] : p1) {
    for (const auto& [b, pb] : truncated(second.at(a))) {
      const double e = kSamples * pa * pb;
      const int n = counts.contains({a, b}) ? counts.at({a, b}) : 0;
      if (e < 5) {
        pooled_expected += e;
        pooled_count += n;
        continue;
      }
      x2 += (n - e) * (n - e) / e;
      ++bins;
    }
  }
  if (pooled_expected > 0) {
    x2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) /
          std::max(pooled_expected, 1e-9);
    ++bins;
  }
  ASSERT_GE(bins, 3);
  EXPECT_GT(chi_square_p(x2, bins - 1), 0.001) << "chi-square " << x2 << " over " << bins;
  EXPECT_GT(accepted_first, 0);  // the first draft is among the likely tokens
  EXPECT_EQ(identical, kSamples);
}

TEST(DraftChiSquareTest, HeadDraftsKeepTheJointDistributionOfTwoTokens) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  auto head = load_draft_head(KEEL_REPO_DRAFT_HEAD, *m);
  ASSERT_TRUE(head.ok()) << head.error().to_string();
  TestOps t;
  const std::vector<int32_t> context = greedy_context(*m, t.ops);
  const Forward base = run(*m, t.ops, context);
  // The head continues the feature of the row that emitted the last context token.
  DraftScratch s;
  std::vector<int32_t> drafts;
  (*head)->draft(base.hidden[context.size() - 2], context.back(), 2, t.ops, &s, &drafts);
  expect_joint_distribution_kept(*m, t.ops, context, base.logits, drafts);
}

// The same with a draft model's drafts: a Q8_0 copy of stories260K drafting greedily for it
// (draft/draft_model_runner.h).
TEST(DraftChiSquareTest, DraftModelDraftsKeepTheJointDistributionOfTwoTokens) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const std::string q8 = testing::make_temp_dir("chi_square_draft") + "/stories260K-q8_0.gguf";
  ASSERT_TRUE(testing::write_q8_0_copy(KEEL_REPO_STORIES, q8).ok());
  auto draft = open_draft_model(q8, *m);
  ASSERT_TRUE(draft.ok()) << draft.error().to_string();
  auto runner = DraftModelRunner::create(**draft, DraftModelConfig{});
  ASSERT_TRUE(runner.ok());
  TestOps t;
  const std::vector<int32_t> context = greedy_context(*m, t.ops);
  std::vector<DraftJob> jobs(1);
  jobs[0].seq_id = 1;
  jobs[0].tokens = context;
  jobs[0].k = 2;
  ASSERT_TRUE((*runner)->draft(jobs, t.ops).ok());
  expect_joint_distribution_kept(*m, t.ops, context, run(*m, t.ops, context).logits,
                                 jobs[0].drafts);
}

}  // namespace
}  // namespace keel::draft
