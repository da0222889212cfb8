// LengthPredictor over the committed predictor for stories260K (models/predictor/): a prediction
// is a valid bucket with probabilities summing to 1, concurrent predict() calls agree with serial
// ones, bad prompts and mismatched side models are InvalidArgument (a file that is no model at all
// keeps the model loader's error), and on a small fixed slice
// of the held-out split (tests/predictor/data) it beats the majority bucket.
#include "predictor/length_predictor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <sstream>
#include <thread>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "predictor/metrics.h"
#include "support/test_support.h"

#if !defined(KEEL_PREDICTOR_FILE) || !defined(KEEL_PREDICTOR_HELDOUT)
#error "KEEL_PREDICTOR_FILE and KEEL_PREDICTOR_HELDOUT must name the committed files"
#endif

namespace keel::predictor {
namespace {

// The best kernel table of this CPU, the one keel train-predictor uses.
kernels::Isa length_best_isa() { return kernels::best_isa(detect_cpu_features()); }

class LengthPredictorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto p = LengthPredictor::load(KEEL_PREDICTOR_FILE, stories_path(), length_best_isa());
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

TEST_F(LengthPredictorTest, BadPromptsAndSideModelsAreRejected) {
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{1, 512}).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(predictor_->predict(std::vector<int32_t>{1, -4}).error().code(),
            StatusCode::kInvalidArgument);
  PredictorFile other = predictor_->file();
  other.feature_n_embd = 32;
  other.head = LengthHead::zeros(other.head.buckets, FeatureExtractor::dim_for(32), 0);
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(LengthPredictor::create(other, **m, length_best_isa()).error().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(LengthPredictor::load(KEEL_PREDICTOR_FILE, KEEL_PREDICTOR_FILE, length_best_isa())
                .error()
                .code(),
            StatusCode::kUnsupported);  // the predictor file is no model (the model loader's error)
}

// The held-out slice (tests/predictor/data): the first 60 held-out samples of the committed
// predictor's dataset, written by train-predictor's dataset cache. Generating their labels costs
// hundreds of decode steps each (too slow for the sanitizer builds), so the test regenerates only
// the two cheapest to show that the fixture is what the dataset builder makes, then predicts all.
std::vector<LengthSample> read_slice() {
  std::vector<LengthSample> out;
  std::istringstream in(keel::testing::read_file(KEEL_PREDICTOR_HELDOUT));
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    LengthSample s;
    ls >> s.index >> s.generated;
    for (int32_t t; ls >> t;) s.prompt.push_back(t);
    out.push_back(std::move(s));
  }
  return out;
}

TEST_F(LengthPredictorTest, BeatsTheMajorityBucketOnAHeldOutSlice) {
  const PredictorFile& f = predictor_->file();
  const std::vector<LengthSample> slice = read_slice();
  ASSERT_EQ(slice.size(), 60u);
  std::vector<size_t> order(slice.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return slice[a].prompt.size() + slice[a].generated <
           slice[b].prompt.size() + slice[b].generated;
  });
  auto m = model::Model::open(stories_path());
  ASSERT_TRUE(m.ok());
  ThreadPool pool(1);
  kernels::Ops ops(length_best_isa(), &pool);
  auto builder = DatasetBuilder::create(f.dataset, **m, **m, {1, 2}, ops);
  ASSERT_TRUE(builder.ok()) << builder.error().to_string();
  for (size_t k : {order[0], order[1]}) {
    ASSERT_TRUE(f.dataset.is_heldout(slice[k].index));
    auto s = (*builder)->sample(slice[k].index);
    ASSERT_TRUE(s.ok()) << s.error().to_string();
    EXPECT_EQ(s->prompt, slice[k].prompt) << "sample " << slice[k].index;
    EXPECT_EQ(s->generated, slice[k].generated) << "sample " << slice[k].index;
  }
  std::vector<int32_t> actual, predicted;
  for (const auto& s : slice) {
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
