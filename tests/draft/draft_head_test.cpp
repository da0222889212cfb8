// The draft head with the repository's stories260K and its committed head: the Ops path of a step
// agrees with the trainer's plain C++ forward (through the loss), drafting feeds the predicted
// feature back and is deterministic, the top-4 candidates are sorted probabilities that begin with
// the drafted token, and the committed head drafts the target's greedy tokens far more often
// than chance.
#include "draft/draft_head.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "draft/draft_trainer.h"
#include "draft_test_util.h"
#include "model/batch.h"
#include "model/context.h"
#include "model/kv_storage.h"

namespace keel::draft {
namespace {

TEST(TopNSoftmaxTest, SortsByProbabilityWithTiesToTheLowerId) {
  const std::vector<float> logits = {0.0f, 2.0f, 1.0f, 2.0f, -1.0f};
  const std::vector<DraftCandidate> top = top_n_softmax(logits, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].token, 1);
  EXPECT_EQ(top[1].token, 3);
  EXPECT_EQ(top[2].token, 2);
  EXPECT_EQ(top[3].token, 0);
  EXPECT_FLOAT_EQ(top[0].probability, top[1].probability);
  double total = 0;
  for (float x : logits) total += std::exp(x);
  EXPECT_NEAR(top[0].probability, std::exp(2.0) / total, 1e-6);
  EXPECT_EQ(top_n_softmax(logits, 9).size(), 5u);
  EXPECT_TRUE(top_n_softmax(logits, 0).empty());
}

// The one-pass selection gives top_n_softmax's ids in its order, ties included, on random logits
// with many repeated values.
TEST(TopNIdsTest, MatchesTopNSoftmaxOrderWithTies) {
  std::vector<int32_t> ids;
  top_n_ids(std::vector<float>{0.0f, 2.0f, 1.0f, 2.0f, -1.0f}, 4, &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 3, 2, 0}));
  uint64_t state = 7;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> logits(1 + trial * 7 % 300);
    for (float& x : logits) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      x = static_cast<float>((state >> 40) % 16) - 8.0f;  // 16 values: many ties
    }
    const int32_t n = 1 + trial % 6;
    top_n_ids(logits, n, &ids);
    std::vector<int32_t> want;
    for (const DraftCandidate& c : top_n_softmax(logits, n)) want.push_back(c.token);
    ASSERT_EQ(ids, want) << "trial " << trial;
  }
  top_n_ids(std::vector<float>{1.0f}, 0, &ids);
  EXPECT_TRUE(ids.empty());
}

// Greedy decoding of the target after `prompt`, with the feature of every fed position.
struct Greedy {
  std::vector<int32_t> tokens;             // prompt then generated
  std::vector<std::vector<float>> hidden;  // per fed position
};
Greedy greedy_run(const model::Model& m, kernels::Ops& ops, const std::vector<int32_t>& prompt,
                  int n) {
  auto kv = model::KvStorage::create(model::KvLayout::for_model(m.hparams(), 16, DType::kF32), 16);
  EXPECT_TRUE(kv.ok());
  model::Context ctx(m, 1);
  std::vector<int32_t> table(16);
  std::iota(table.begin(), table.end(), 0);
  Greedy g;
  g.tokens = prompt;
  const size_t want = prompt.size() + static_cast<size_t>(n);
  std::vector<float> logits, hidden;
  for (size_t pos = 0; g.tokens.size() < want; ++pos) {
    model::Batch b;
    const int32_t seq = b.add_seq(table);
    b.add(g.tokens[pos], static_cast<int32_t>(pos), seq, true);
    EXPECT_TRUE(ctx.forward(b, *kv, ops, &logits, &hidden).ok());
    g.hidden.push_back(hidden);
    if (pos + 1 == g.tokens.size()) {
      g.tokens.push_back(
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
    }
  }
  return g;
}

TEST(DraftHeadTest, CommittedHeadDraftsTheTargetsGreedyTokens) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  auto head = load_draft_head(KEEL_REPO_DRAFT_HEAD, *m);
  ASSERT_TRUE(head.ok()) << head.error().to_string();
  TestOps t;
  const Greedy g = greedy_run(*m, t.ops, {1, 403, 407}, 96);
  ASSERT_GE(g.hidden.size(), 90u);
  DraftScratch s;
  std::vector<int32_t> drafts, again;
  int first_right = 0, total = 0;
  for (size_t p = 1; p + 3 < g.hidden.size(); ++p) {  // p + 2 ≥ 3: generated labels
    (*head)->draft(g.hidden[p], g.tokens[p + 1], 3, t.ops, &s, &drafts);
    ASSERT_EQ(drafts.size(), 3u);
    (*head)->draft(g.hidden[p], g.tokens[p + 1], 3, t.ops, &s, &again);
    EXPECT_EQ(drafts, again);  // deterministic
    const std::vector<DraftCandidate> top =
        (*head)->top_candidates(g.hidden[p], g.tokens[p + 1], 4, t.ops, &s);
    ASSERT_EQ(top.size(), 4u);
    EXPECT_EQ(top[0].token, drafts[0]);
    for (size_t i = 1; i < top.size(); ++i) EXPECT_GE(top[i - 1].probability, top[i].probability);
    first_right += drafts[0] == g.tokens[p + 2];
    ++total;
  }
  // Chance is 1/512; the trained head agrees with the target's greedy token most of the time.
  EXPECT_GT(static_cast<double>(first_right) / total, 0.5) << first_right << " of " << total;
}

// The engine's step (Ops, F32 matmuls, the target's LM head) and the trainer's plain forward give
// the same argmax on the model's own text: their accuracies over a dataset agree.
TEST(DraftHeadTest, OpsStepAgreesWithTheTrainersForward) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  auto file = read_draft_head(KEEL_REPO_DRAFT_HEAD);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  TestOps t;
  auto data = build_draft_dataset(*m, small_spec(200), t.ops);
  ASSERT_TRUE(data.ok()) << data.error().to_string();
  const DraftHead head(file->weights, *m);
  DraftScratch s;
  int right = 0;
  const auto d = static_cast<size_t>(data->n_embd);
  for (const DraftPair& p : data->pairs) {
    head.step(std::span<const float>(data->features.data() + static_cast<size_t>(p.row) * d, d),
              p.token, t.ops, &s);
    right += std::max_element(s.logits.begin(), s.logits.end()) - s.logits.begin() == p.label;
  }
  const DraftLoss l = evaluate_draft_head(file->weights, *data, *m, 1.0f);
  EXPECT_NEAR(static_cast<double>(right) / static_cast<double>(data->pairs.size()), l.accuracy,
              0.02);
  EXPECT_GT(l.accuracy, 0.4);
}

}  // namespace
}  // namespace keel::draft
