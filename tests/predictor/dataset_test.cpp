// The dataset: the spec's checks and held-out split, the cache file (round trip; another spec,
// truncated or malformed files are InvalidArgument), and on stories260K that a sample is a pure
// function of its index and that a tiny training run on real prompts lowers the loss.
#include "predictor/dataset.h"

#include <gtest/gtest.h>

#include <fstream>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "predictor/dataset_file.h"
#include "predictor/features.h"
#include "predictor/trainer.h"
#include "support/test_support.h"

namespace keel::predictor {
namespace {

// The best kernel table of this CPU, the one keel train-predictor uses.
kernels::Isa best_isa() { return kernels::best_isa(detect_cpu_features()); }

TEST(DatasetSpecTest, ValidateAndSplit) {
  DatasetSpec s;
  EXPECT_TRUE(s.validate().ok());
  s.num_prompts = 12;
  EXPECT_EQ(split_indices(s, true), (std::vector<int32_t>{4, 9}));
  EXPECT_EQ(split_indices(s, false).size(), 10u);
  DatasetSpec bad = s;
  bad.min_prompt_tokens = 1;
  EXPECT_FALSE(bad.validate().ok());
  bad = s;
  bad.max_prompt_tokens = 3;
  EXPECT_FALSE(bad.validate().ok());
  bad = s;
  bad.heldout_every = 1;
  EXPECT_FALSE(bad.validate().ok());
  bad = s;
  bad.temperature = -1;
  EXPECT_FALSE(bad.validate().ok());
}

TEST(DatasetFileTest, RoundTripAndMismatches) {
  const std::string dir = keel::testing::make_temp_dir("predictor-dataset");
  DatasetKey key{DatasetSpec{}, "served.gguf", "side.gguf"};
  key.spec.num_prompts = 3;
  const std::vector<LengthSample> samples = {
      {0, {1, 5, 6}, 17}, {1, {1, 9}, 0}, {2, {1, 2, 3}, 256}};
  const std::string p = dir + "/ds.txt";
  ASSERT_TRUE(save_samples(p, key, samples).ok());
  auto r = load_samples(p, key);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  ASSERT_EQ(r->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*r)[i].index, samples[i].index);
    EXPECT_EQ((*r)[i].prompt, samples[i].prompt);
    EXPECT_EQ((*r)[i].generated, samples[i].generated);
  }
  EXPECT_EQ(load_samples(dir + "/absent", key).error().code(), StatusCode::kNotFound);
  DatasetKey other = key;
  other.spec.seed = 2;
  EXPECT_EQ(load_samples(p, other).error().code(), StatusCode::kInvalidArgument);
  other = key;
  other.served_model = "x.gguf";
  EXPECT_EQ(load_samples(p, other).error().code(), StatusCode::kInvalidArgument);
  const std::string text = keel::testing::read_file(p);
  for (const std::string& broken :
       {text.substr(0, text.size() - 12), text + "3 x 1 2\n", text + "7 1 1\n"}) {
    std::ofstream(p, std::ios::trunc) << broken;
    EXPECT_EQ(load_samples(p, key).error().code(), StatusCode::kInvalidArgument) << broken;
  }
}

class StoriesDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto m = model::Model::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    model_ = std::move(*m);
    spec_.num_prompts = 10;
    spec_.min_prompt_tokens = 4;
    spec_.max_prompt_tokens = 24;
    spec_.max_new_tokens = 24;
    auto b = DatasetBuilder::create(spec_, *model_, *model_, {1, 2}, ops_);
    ASSERT_TRUE(b.ok()) << b.error().to_string();
    builder_ = std::move(*b);
  }
  ThreadPool pool_{1};
  kernels::Ops ops_{best_isa(), &pool_};
  std::unique_ptr<model::Model> model_;
  DatasetSpec spec_;
  std::unique_ptr<DatasetBuilder> builder_;
};

TEST_F(StoriesDatasetTest, ASampleIsAPureFunctionOfItsIndex) {
  auto a = builder_->sample(3);
  auto other = builder_->sample(4);
  auto b = builder_->sample(3);
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(a->prompt, b->prompt);
  EXPECT_EQ(a->generated, b->generated);
  EXPECT_NE(a->prompt, other->prompt);
  EXPECT_EQ(a->prompt.front(), 1);  // BOS
  EXPECT_GE(a->prompt.size(), 4u);
  EXPECT_LE(a->prompt.size(), 24u);
  EXPECT_GE(a->generated, 0);
  EXPECT_LE(a->generated, 24);
  for (size_t i = 1; i < a->prompt.size(); ++i) {
    EXPECT_NE(a->prompt[i], 1);
    EXPECT_NE(a->prompt[i], 2);
  }
}

TEST_F(StoriesDatasetTest, TinyTrainingOnRealPromptsLowersTheLoss) {
  auto samples = builder_->samples({0, 1, 2, 3, 5, 6, 7, 8}, {});
  ASSERT_TRUE(samples.ok()) << samples.error().to_string();
  const LengthBuckets buckets{8, spec_.max_new_tokens};
  const FeatureExtractor fx(*model_, best_isa());
  std::vector<std::vector<float>> x;
  std::vector<int32_t> y;
  for (const auto& s : *samples) {
    auto f = fx.extract(s.prompt);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    EXPECT_EQ(static_cast<int64_t>(f->size()), fx.dim());
    x.push_back(*f);
    y.push_back(buckets.bucket_of(s.generated));
  }
  TrainConfig c;
  c.steps = 15;
  c.learning_rate = 0.05f;
  auto r = train_head(x, y, buckets, c);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_LT(r->loss.back(), 0.7 * r->loss.front());
}

TEST_F(StoriesDatasetTest, PromptsPastTheContextAreRejected) {
  DatasetSpec s = spec_;
  s.max_prompt_tokens = 600;  // past stories260K's context of 512
  EXPECT_EQ(DatasetBuilder::create(s, *model_, *model_, {1, 2}, ops_).error().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::predictor
