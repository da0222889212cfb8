// The trainer on a short run of stories260K's own text: the dataset holds what it says (pairs
// that continue each other, features of the output-norm width); a few Adam steps lower the loss
// (a broken gradient would not); the same seed gives the same weights and another seed others;
// bad configurations are refused.
#include "draft/draft_trainer.h"

#include <gtest/gtest.h>

#include "draft_test_util.h"

namespace keel::draft {
namespace {

TEST(DraftDatasetTest, PairsFollowTheModelsOwnText) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  auto data = build_draft_dataset(*m, small_spec(150), t.ops);
  ASSERT_TRUE(data.ok()) << data.error().to_string();
  EXPECT_EQ(data->pairs.size(), 150u);
  EXPECT_GE(data->num_sequences, 3);  // sequences of at most 64 tokens
  const auto rows = static_cast<int64_t>(data->features.size()) / data->n_embd;
  for (size_t i = 0; i < data->pairs.size(); ++i) {
    const DraftPair& p = data->pairs[i];
    ASSERT_LT(p.row + 1, rows);
    if (i > 0 && data->pairs[i - 1].row + 1 == p.row) {
      EXPECT_EQ(data->pairs[i - 1].label, p.token) << i;  // consecutive positions
    }
  }
  auto again = build_draft_dataset(*m, small_spec(150), t.ops);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->features, data->features);  // a pure function of the spec
  DraftDataSpec bad = small_spec(10);
  bad.bos = 100000;
  EXPECT_FALSE(build_draft_dataset(*m, bad, t.ops).ok());
}

TEST(DraftTrainerTest, AFewStepsLowerTheLossDeterministically) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  auto data = build_draft_dataset(*m, small_spec(256), t.ops);
  ASSERT_TRUE(data.ok()) << data.error().to_string();
  DraftTrainConfig c;
  c.hidden = 32;
  c.epochs = 4;
  c.batch = 32;
  c.learning_rate = 3e-3f;
  c.seed = 7;
  auto r = train_draft_head(*data, *m, c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->steps, 32);
  ASSERT_EQ(r->epochs.size(), 4u);
  const DraftLoss after = evaluate_draft_head(r->weights, *data, *m, c.feature_weight);
  EXPECT_LT(after.loss, 0.8 * r->before.loss) << r->before.loss << " -> " << after.loss;
  EXPECT_LT(after.cross_entropy, r->before.cross_entropy);
  EXPECT_GT(after.accuracy, r->before.accuracy);
  auto same = train_draft_head(*data, *m, c);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->weights.w_in, r->weights.w_in);
  EXPECT_EQ(same->weights.w_down, r->weights.w_down);
  c.seed = 8;
  auto other = train_draft_head(*data, *m, c);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->weights.w_in, r->weights.w_in);
  c.max_steps = 3;
  auto cut = train_draft_head(*data, *m, c);
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->steps, 3);
}

TEST(DraftTrainerTest, BadInputsAreRefused) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  DraftTrainConfig c;
  c.hidden = 0;
  EXPECT_FALSE(c.validate().ok());
  c = DraftTrainConfig{};
  c.epochs = 0;
  EXPECT_FALSE(c.validate().ok());
  DraftDataset empty;
  empty.n_embd = m->hparams().n_embd;
  EXPECT_FALSE(train_draft_head(empty, *m, DraftTrainConfig{}).ok());
  DraftDataset wide;
  wide.n_embd = 3;
  wide.pairs.push_back({0, 1, 2});
  wide.features.assign(6, 0.0f);
  EXPECT_FALSE(train_draft_head(wide, *m, DraftTrainConfig{}).ok());
}

}  // namespace
}  // namespace keel::draft
