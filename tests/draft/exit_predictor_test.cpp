// SpecEE's exit predictors: the 12 features (softmax and Δ by hand), the MLP against a hand
// computation, the evaluator's threshold semantics and verification on stories260K, the exit
// file (round trip, corrupt, another version, another model: InvalidArgument naming the file),
// the committed stories260K predictors loading against their model, and a short training run
// that lowers every layer's loss and gives a calibration histogram over every token.
#include "draft/exit_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "draft/exit_dataset.h"
#include "draft/exit_predictor_file.h"
#include "draft/exit_trainer.h"
#include "draft/target_digest.h"
#include "draft_test_util.h"
#include "support/test_support.h"

namespace keel::draft {
namespace {

ExitPredictors tiny_predictors(int64_t n_layer, float b2) {
  ExitPredictors p;
  p.n_layer = n_layer;
  p.hidden = 2;
  p.exit_counts.assign(static_cast<size_t>(n_layer), 1);
  for (int64_t l = 0; l + 1 < n_layer; ++l) {
    LayerExitPredictor q;
    q.w1.assign(2 * kExitFeatures, 0.0f);
    q.w1[0] = 1.0f;                   // unit 0 reads the first logit
    q.w1[kExitFeatures + 4] = -1.0f;  // unit 1 reads minus the first probability
    q.b1 = {0.0f, 0.5f};
    q.w2 = {2.0f, 1.0f};
    q.b2 = b2;
    p.layers.push_back(q);
  }
  return p;
}

TEST(ExitPredictorTest, FeaturesAreLogitsSoftmaxAndTheChange) {
  const float z[4] = {1.0f, 0.0f, 0.0f, -1.0f};
  std::array<float, 4> probs{};
  const ExitFeatureRow first = exit_features(std::span<const float, 4>(z, 4), nullptr, &probs);
  const double e = std::exp(1.0), total = e + 2.0 + std::exp(-1.0);
  EXPECT_FLOAT_EQ(first[0], 1.0f);
  EXPECT_NEAR(first[4], e / total, 1e-6);
  EXPECT_NEAR(first[7], std::exp(-1.0) / total, 1e-6);
  EXPECT_FLOAT_EQ(first[8], first[4]);  // the first evaluated layer: Δ = p
  const float prev[4] = {0.5f, 0.5f, 0.0f, 0.0f};
  const ExitFeatureRow next = exit_features(std::span<const float, 4>(z, 4), prev, &probs);
  EXPECT_NEAR(next[8], e / total - 0.5, 1e-6);
  EXPECT_NEAR(next[11], std::exp(-1.0) / total, 1e-6);
}

TEST(ExitPredictorTest, PredictIsTheMlpWithReluAndSigmoid) {
  const ExitPredictors p = tiny_predictors(3, -1.0f);
  ASSERT_TRUE(p.validate().ok()) << p.validate().to_string();
  ExitFeatureRow f{};
  f[0] = 2.0f;  // unit 0: relu(2) = 2
  f[4] = 1.0f;  // unit 1: relu(0.5 - 1) = 0
  EXPECT_NEAR(p.predict(1, f), 1.0 / (1.0 + std::exp(-(-1.0 + 4.0))), 1e-6);
  f[0] = -3.0f;  // unit 0 off
  f[4] = 0.0f;   // unit 1: 0.5
  EXPECT_NEAR(p.predict(0, f), 1.0 / (1.0 + std::exp(-(-1.0 + 0.5))), 1e-6);
}

TEST(ExitPredictorTest, ValidateNamesWhatIsWrong) {
  ExitPredictors p = tiny_predictors(3, 0.0f);
  p.layers.pop_back();
  EXPECT_NE(p.validate().message().find("layers"), std::string::npos);
  p = tiny_predictors(3, 0.0f);
  p.layers[1].w2[0] = NAN;
  EXPECT_NE(p.validate().message().find("non-finite"), std::string::npos);
}

// Threshold above 1: never an exit. Below 0: an exit exactly when the layer's full LM-head argmax
// is one of the candidates (the verification).
TEST(ExitPredictorTest, EvaluatorThresholdsAndVerification) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  TestOps t;
  const int64_t n_layer = m->hparams().n_layer, d = m->hparams().n_embd;
  const ExitPredictors p = tiny_predictors(n_layer, 0.0f);
  std::vector<float> residual(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) residual[static_cast<size_t>(i)] = std::sin(0.37f * i);
  std::vector<float> normed(residual.size()), logits(static_cast<size_t>(m->hparams().n_vocab));
  t.ops.rms_norm(residual.data(), m->weights().output_norm.data(), 1, d, m->hparams().rms_eps,
                 normed.data());
  t.ops.matmul(m->weights().output, normed.data(), 1, logits.data());
  const auto top =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const int32_t other = top == 5 ? 6 : 5;
  ExitEvaluator never(p, *m, 2.0f);
  never.begin(std::vector<int32_t>{top});
  EXPECT_FALSE(never.at_layer(0, residual, t.ops));
  EXPECT_EQ(never.num_predicted(), 0);
  ExitEvaluator always(p, *m, -1.0f);
  always.begin(std::vector<int32_t>{other, top});
  EXPECT_TRUE(always.at_layer(0, residual, t.ops));
  always.begin(std::vector<int32_t>{other});
  EXPECT_FALSE(always.at_layer(1, residual, t.ops));  // predicted, not verified
  EXPECT_EQ(always.num_predicted(), 2);
}

ExitPredictorFile small_exit_file(const model::Model& m) {
  ExitPredictorFile f;
  f.predictors = tiny_predictors(m.hparams().n_layer, 0.25f);
  f.n_embd = m.hparams().n_embd;
  f.n_vocab = m.hparams().n_vocab;
  f.target_digest = target_digest(m);
  f.target_name = "stories260K.gguf";
  f.train_tokens = 10;
  f.train_epochs = 2;
  f.train_seed = 7;
  f.accuracy.assign(static_cast<size_t>(m.hparams().n_layer - 1), 0.75f);
  f.command = "keel train-exit -m stories260K.gguf";
  return f;
}

void expect_invalid(const Status& s, const std::string& path, const std::string& what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

TEST(ExitPredictorFileTest, RoundTripAndBadFiles) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  const std::string dir = testing::make_temp_dir("exit_file");
  const std::string path = dir + "/m.exit.gguf";
  ExitPredictorFile f = small_exit_file(*m);
  ASSERT_TRUE(save_exit_predictors(f, path).ok());
  auto back = load_exit_predictors(path, *m);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(back->predictors.layers[1].w1, f.predictors.layers[1].w1);
  EXPECT_EQ(back->predictors.layers[1].b2, f.predictors.layers[1].b2);
  EXPECT_EQ(back->predictors.exit_counts, f.predictors.exit_counts);
  EXPECT_EQ(back->accuracy, f.accuracy);
  EXPECT_EQ(back->command, f.command);
  // Another model (digest), another version, not GGUF, cut short.
  f.target_digest ^= 1;
  ASSERT_TRUE(save_exit_predictors(f, path).ok());
  expect_invalid(load_exit_predictors(path, *m).status(), path, "another model");
  std::ofstream(dir + "/junk.gguf", std::ios::binary) << "not a gguf file at all";
  expect_invalid(read_exit_predictors(dir + "/junk.gguf").status(), dir + "/junk.gguf", "");
  const std::string bytes = testing::read_file(path);
  std::ofstream(dir + "/cut.gguf", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_invalid(read_exit_predictors(dir + "/cut.gguf").status(), dir + "/cut.gguf", "");
  EXPECT_EQ(read_exit_predictors(dir + "/missing.gguf").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(default_exit_path("/a/b/m.gguf"), "/a/b/m.exit.gguf");
}

TEST(ExitPredictorFileTest, CommittedPredictorsLoadForStories260K) {
  auto m = load_repo_stories();
  ASSERT_NE(m, nullptr);
  auto f = load_exit_predictors(KEEL_REPO_EXIT_PREDICTORS, *m);
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->predictors.hidden, 512);
  int64_t total = 0;
  for (int64_t c : f->predictors.exit_counts) total += c;
  EXPECT_EQ(total, f->train_tokens);
}

TEST(ExitTrainerTest, AFewStepsLowerEveryLayersLoss) {
  auto m = load_repo_stories();
  auto head_file = read_draft_head(KEEL_REPO_DRAFT_HEAD);
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(head_file.ok());
  const DraftHead head(head_file->weights, *m);
  TestOps t;
  auto data = build_exit_dataset(*m, head, small_spec(96), t.ops);
  ASSERT_TRUE(data.ok()) << data.error().to_string();
  ASSERT_EQ(data->num_tokens(), 96);
  ASSERT_EQ(static_cast<int64_t>(data->layers.size()), m->hparams().n_layer - 1);
  ExitTrainConfig c;
  c.hidden = 32;
  c.batch = 16;
  c.epochs = 4;
  c.learning_rate = 1e-2f;
  auto r = train_exit_predictors(*data, c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  for (const ExitLayerStats& s : r->layers) EXPECT_LT(s.loss, s.loss_before);
  int64_t total = 0;
  for (int64_t n : r->predictors.exit_counts) total += n;
  EXPECT_EQ(total, 96);
  // Deterministic: the same data and seed give the same weights.
  auto again = train_exit_predictors(*data, c);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->predictors.layers[0].w1, r->predictors.layers[0].w1);
}

}  // namespace
}  // namespace keel::draft
