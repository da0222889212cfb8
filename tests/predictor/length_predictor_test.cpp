// LengthPredictor over the committed predictor for stories260K (models/predictor/): a prediction
// is a valid bucket with probabilities summing to 1, concurrent predict() calls agree with serial
// ones, bad prompts and mismatched side models are InvalidArgument, and on a small fixed slice
// of the held-out split (regenerated from the spec in the file) it beats the majority bucket.
#include "predictor/length_predictor.h"

#include <gtest/gtest.h>

#include <numeric>
#include <thread>

#include "core/thread_pool.h"
#include "predictor/metrics.h"
#include "support/test_support.h"

#ifndef KEEL_PREDICTOR_FILE
#error "KEEL_PREDICTOR_FILE must name the committed predictor file"
#endif

namespace keel::predictor {
namespace {

// The first held-out samples the accuracy test regenerates (labels cost a few hundred decode
// steps each, so the slice stays small for the sanitizer builds).
constexpr size_t kHeldOutSlice = 40;

class LengthPredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto p = LengthPredictor::load(KEEL_PREDICTOR_FILE, stories_path(), kernels::Isa::kScalar);
    ASSERT_TRUE(p.ok()) << p.error().to_string();
    predictor_ = std::move(*p);
  }
  static std::string stories_path() {
    return keel::testing::shared_path("models/stories260K/stories260K.gguf");
  }
  std::unique_ptr<LengthPredictor> predictor_;
};

void expect_valid(const LengthPrediction& p, const LengthBuckets& b) {
  ASSERT_EQ(static_cast<int32_t>(p.probabilities.size()), b.num_buckets());
  ASSERT_GE(p.bucket, 0);
  ASSERT_LT(p.bucket, b.num_buckets());
  EXPECT_NEAR(std::accumulate(p.probabilities.begin(), p.probabilities.end(), 0.0), 1.0, 1e-5);
  for (float q : p.probabilities) {
    EXPECT_GE(q, 0.0f);
    EXPECT_LE(q, p.probabilities[static_cast<size_t>(p.bucket)]);
  }
  EXPECT_EQ(p.predicted_tokens, b.midpoint(p.bucket));
}

TEST_F(LengthPredictorTest, PredictsAValidBucket) {
  EXPECT_FALSE(predictor_->file().command.empty());
  const std::vector<int32_t> prompt = {1, 403, 407, 261, 378, 261, 394, 432, 13, 421};
  auto p = predictor_->predict(prompt);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  expect_valid(*p, predictor_->buckets());
  // A prompt past the side model's context is cut to its end, not rejected.
  std::vector<int32_t> longer(600, 300);
  longer[0] = 1;
  auto q = predictor_->predict(longer);
  ASSERT_TRUE(q.ok()) << q.error().to_string();
  expect_valid(*q, predictor_->buckets());
}

TEST_F(LengthPredictorTest, ConcurrentPredictionsMatchSerialOnes) {
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t i = 0; i < 8; ++i) {
    std::vector<int32_t> p = {1};
    for (int32_t j = 0; j < 5 + 3 * i; ++j) p.push_back(3 + (i * 37 + j * 11) % 500);
    prompts.push_back(p);
  }
  std::vector<LengthPrediction> serial;
  for (const auto& p : prompts) serial.push_back(*predictor_->predict(p));
  std::vector<std::vector<LengthPrediction>> got(3);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t) {
    threads.emplace_back([&, t] {
      for (const auto& p : prompts) got[t].push_back(*predictor_->predict(p));
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& g : got) {
    ASSERT_EQ(g.size(), serial.size());
    for (size_t i = 0; i < g.size(); ++i) {
      EXPECT_EQ(g[i].bucket, serial[i].bucket);
      EXPECT_EQ(g[i].probabilities, serial[i].probabilities);
    }
  }
}

TEST_F(LengthPredictorTest, BadPromptsAndSideModelsAreInvalidArgument) {
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{1, 512}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{1, -4}).error().code(), StatusCode::kInvalidArgument);
  PredictorFile other = predictor_->file();
  other.feature_n_embd = 32;
  other.head = LengthHead::zeros(other.head.buckets, 65, 0);
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(LengthPredictor::create(other, **m, kernels::Isa::kScalar).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LengthPredictor::load(KEEL_PREDICTOR_FILE, KEEL_PREDICTOR_FILE, kernels::Isa::kScalar)
                .error()
                .code(),
            StatusCode::kInvalidArgument);  // the predictor file is no model
}

TEST_F(LengthPredictorTest, BeatsTheMajorityBucketOnAHeldOutSlice) {
  const PredictorFile& f = predictor_->file();
  std::vector<int32_t> indices = split_indices(f.dataset, /*held_out=*/true);
  ASSERT_GE(indices.size(), kHeldOutSlice);
  indices.resize(kHeldOutSlice);
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  ThreadPool pool(1);
  kernels::Ops ops(kernels::Isa::kScalar, &pool);
  auto builder = DatasetBuilder::create(f.dataset, **m, **m, {1, 2}, ops);
  ASSERT_TRUE(builder.ok()) << builder.error().to_string();
  auto samples = (*builder)->samples(indices, {});
  ASSERT_TRUE(samples.ok()) << samples.error().to_string();
  std::vector<int32_t> actual, predicted;
  for (const auto& s : *samples) {
    auto p = predictor_->predict(s.prompt);
    ASSERT_TRUE(p.ok());
    actual.push_back(s.generated);
    predicted.push_back(p->bucket);
  }
  const LengthMetrics mt = length_metrics(f.head.buckets, actual, predicted, f.majority_bucket);
  EXPECT_GT(mt.accuracy, mt.baseline_accuracy)
      << "accuracy " << mt.accuracy << " vs majority " << mt.baseline_accuracy;
  EXPECT_LT(mt.mae_tokens, mt.baseline_mae_tokens);
}

}  // namespace
}  // namespace keel::predictor
