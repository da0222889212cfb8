// draft::ExitPass — the exit decisions the engine and `keel bench --exit-predictors` build — on
// stories260K: with every predictor layer active and a threshold above 1 (the bench's setting)
// decode steps give exactly the plain forward()'s logits, no token exits, and every layer's
// predictor ran (committed and seeded random predictors alike); the active mask limits where
// predictors run; at a threshold below 0 a token exits only where verification passes and reports
// that layer. random_exit_predictors: valid, of the asked shape, deterministic for a seed.
#include "draft/exit_pass.h"

#include <gtest/gtest.h>

#include <numeric>

#include "draft/draft_trainer.h"
#include "draft/exit_predictor_file.h"
#include "draft/exit_trainer.h"
#include "draft_test_util.h"
#include "model/context.h"

namespace keel::draft {
namespace {

model::KvStorage make_kv(const model::Model& m) {
  auto kv = model::KvStorage::create(model::KvLayout::for_model(m.hparams(), 16, DType::kF32), 8);
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

model::Batch decode_batch(int32_t token, int32_t pos) {
  model::Batch b;
  std::vector<int32_t> table(8);
  std::iota(table.begin(), table.end(), 0);
  const int32_t s = b.add_seq(table);
  b.add(token, pos, s, true);
  return b;
}

// Decodes 12 tokens plainly and through an ExitPass at `threshold` over the same positions; expects
// bit-equal logits up to the first exit (after it, later tokens attend to its filled K/V). Returns
// the exit layers.
std::vector<int32_t> decode_both(const model::Model& m, const DraftHead& head,
                                 const ExitPredictors& p, float threshold,
                                 std::span<const uint8_t> active, int64_t* evaluated) {
  TestOps t;
  model::KvStorage kv_plain = make_kv(m), kv_exit = make_kv(m);
  model::Context plain(m, 1), with(m, 1);
  std::vector<float> lp, le, feature(static_cast<size_t>(m.hparams().n_embd), 0.0f), hidden;
  std::vector<int32_t> layers;
  DraftScratch scratch;
  int32_t token = 1;
  bool exited = false;
  for (int32_t pos = 0; pos < 12; ++pos) {
    const model::Batch b = decode_batch(token, pos);
    EXPECT_TRUE(plain.forward(b, kv_plain, t.ops, &lp).ok());
    ExitPass pass(p, m, 1);
    pass.add_row(0, head, feature, token, threshold, active, t.ops, &scratch);
    model::EarlyExit ee;
    pass.bind(&ee, t.ops);
    EXPECT_TRUE(with.forward_early_exit(b, kv_exit, t.ops, &ee, &le, &hidden).ok());
    layers.push_back(ee.exit_layer[0]);
    *evaluated += pass.evaluator(0)->num_evaluated();
    EXPECT_EQ(pass.evaluator(1), nullptr);
    if (ee.exit_layer[0] < m.hparams().n_layer - 1) {
      EXPECT_GE(pass.evaluator(0)->num_predicted(), 1);
      exited = true;
    } else if (!exited) {
      EXPECT_EQ(lp, le) << "pos " << pos;  // bit for bit
    }
    feature = hidden;
    token = static_cast<int32_t>(std::max_element(lp.begin(), lp.end()) - lp.begin());
  }
  return layers;
}

TEST(ExitPassTest, AboveOneNothingExitsAndLogitsArePlain) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const int64_t last = m->hparams().n_layer - 1;
  auto head = load_draft_head(KEEL_REPO_DRAFT_HEAD, *m);
  ASSERT_TRUE(head.ok()) << head.error().to_string();
  auto file = load_exit_predictors(KEEL_REPO_EXIT_PREDICTORS, *m);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  int64_t evaluated = 0;
  for (int32_t l : decode_both(*m, **head, file->predictors, 2.0f, {}, &evaluated)) {
    EXPECT_EQ(l, last);
  }
  EXPECT_EQ(evaluated, 12 * last);  // every predictor layer, every step
  // The bench's random machinery: the same.
  DraftTrainConfig cfg;
  const DraftHead random_head(init_draft_head(*m, cfg), *m);
  const ExitPredictors random = random_exit_predictors(m->hparams().n_layer, 512, 1);
  evaluated = 0;
  for (int32_t l : decode_both(*m, random_head, random, 2.0f, {}, &evaluated)) EXPECT_EQ(l, last);
  EXPECT_EQ(evaluated, 12 * last);
}

TEST(ExitPassTest, ActiveMaskAndExitsBelowZero) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const int64_t last = m->hparams().n_layer - 1;
  auto head = load_draft_head(KEEL_REPO_DRAFT_HEAD, *m);
  ASSERT_TRUE(head.ok());
  auto file = load_exit_predictors(KEEL_REPO_EXIT_PREDICTORS, *m);
  ASSERT_TRUE(file.ok());
  std::vector<uint8_t> only(static_cast<size_t>(last + 1), 0);
  only[1] = 1;
  int64_t evaluated = 0;
  decode_both(*m, **head, file->predictors, 2.0f, only, &evaluated);
  EXPECT_EQ(evaluated, 12);  // layer 1 only
  evaluated = 0;
  int exits = 0;
  for (int32_t l : decode_both(*m, **head, file->predictors, -1.0f, {}, &evaluated)) {
    EXPECT_GE(l, 0);
    EXPECT_LE(l, last);
    exits += l < last ? 1 : 0;
  }
  EXPECT_GT(exits, 0);  // the trained head's top-4 hold an early argmax somewhere in 12 steps
}

TEST(ExitPassTest, RandomPredictorsHaveTheShapeAndTheSeed) {
  const ExitPredictors a = random_exit_predictors(6, 32, 7);
  ASSERT_TRUE(a.validate().ok()) << a.validate().to_string();
  EXPECT_EQ(a.layers.size(), 5u);
  EXPECT_EQ(a.layers[0].w1.size(), 32u * kExitFeatures);
  const ExitPredictors b = random_exit_predictors(6, 32, 7);
  EXPECT_EQ(a.layers[3].w1, b.layers[3].w1);
  const ExitPredictors c = random_exit_predictors(6, 32, 8);
  EXPECT_NE(a.layers[3].w1, c.layers[3].w1);
}

}  // namespace
}  // namespace keel::draft
