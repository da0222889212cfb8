// train_head on synthetic features: the loss falls, the result is deterministic, the head learns
// a separable problem (softmax regression and MLP), and bad inputs are InvalidArgument. Plus the
// metrics of a prediction set against the majority baseline.
#include "predictor/trainer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "predictor/metrics.h"
#include "sampling/rng.h"

namespace keel::predictor {
namespace {

// Three classes by the sign pattern of two informative features, plus noise features on other
// scales (standardisation must cope).
void make_data(int n, std::vector<std::vector<float>>* x, std::vector<int32_t>* y) {
  sampling::Rng rng(7);
  for (int i = 0; i < n; ++i) {
    const int32_t c = i % 3;
    const float a = (c == 0 ? -1.0f : 1.0f) + 0.3f * static_cast<float>(rng.next_double() - 0.5);
    const float b = (c == 2 ? 5.0f : -5.0f) + static_cast<float>(rng.next_double() - 0.5);
    x->push_back({a, b, 100.0f * static_cast<float>(rng.next_double()), 3.0f});
    y->push_back(c);
  }
}

TEST(TrainerTest, LossFallsAndTheHeadSeparatesTheClasses) {
  std::vector<std::vector<float>> x;
  std::vector<int32_t> y;
  make_data(60, &x, &y);
  const LengthBuckets buckets{10, 30};
  for (int64_t hidden : {0, 8}) {
    TrainConfig c;
    c.hidden = hidden;
    c.steps = 60;
    c.learning_rate = 0.05f;
    auto r = train_head(x, y, buckets, c);
    ASSERT_TRUE(r.ok()) << r.error().to_string();
    ASSERT_EQ(r->loss.size(), 61u);
    EXPECT_NEAR(r->loss.front(), std::log(3.0), 0.2) << hidden;  // uniform at the start
    EXPECT_LT(r->loss.back(), 0.5 * r->loss.front()) << hidden;
    int correct = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const std::vector<float> p = r->head.probabilities(x[i]);
      correct += std::max_element(p.begin(), p.end()) - p.begin() == y[i] ? 1 : 0;
    }
    EXPECT_EQ(correct, 60) << hidden;
  }
}

TEST(TrainerTest, SameInputsSameHead) {
  std::vector<std::vector<float>> x;
  std::vector<int32_t> y;
  make_data(30, &x, &y);
  TrainConfig c;
  c.hidden = 4;
  c.steps = 10;
  auto a = train_head(x, y, LengthBuckets{10, 30}, c);
  auto b = train_head(x, y, LengthBuckets{10, 30}, c);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->head.w1, b->head.w1);
  EXPECT_EQ(a->head.w2, b->head.w2);
  EXPECT_EQ(a->loss, b->loss);
}

TEST(TrainerTest, BadInputsAreInvalidArgument) {
  const LengthBuckets b{10, 30};
  EXPECT_EQ(train_head({}, {}, b, {}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(train_head({{1, 2}}, {0, 1}, b, {}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(train_head({{1, 2}, {1}}, {0, 1}, b, {}).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(train_head({{1, 2}}, {3}, b, {}).error().code(), StatusCode::kInvalidArgument);
  TrainConfig c;
  c.learning_rate = 0;
  EXPECT_EQ(train_head({{1, 2}}, {0}, b, c).error().code(), StatusCode::kInvalidArgument);
}

TEST(MetricsTest, AccuracyMaeConfusionAndMajority) {
  const LengthBuckets b{10, 30};  // buckets [0,10) [10,20) [20,30]; midpoints 4, 14, 25
  const std::vector<int32_t> actual = {3, 12, 30, 25};
  EXPECT_EQ(majority_bucket(b, actual), 2);
  const LengthMetrics m = length_metrics(b, actual, {0, 2, 2, 1}, /*majority_bucket=*/2);
  EXPECT_EQ(m.count, 4);
  EXPECT_DOUBLE_EQ(m.accuracy, 0.5);
  EXPECT_DOUBLE_EQ(m.baseline_accuracy, 0.5);
  EXPECT_DOUBLE_EQ(m.mae_tokens, (1 + 13 + 5 + 11) / 4.0);
  EXPECT_DOUBLE_EQ(m.baseline_mae_tokens, (22 + 13 + 5 + 0) / 4.0);
  EXPECT_EQ(m.confusion[0][0], 1);
  EXPECT_EQ(m.confusion[1][2], 1);
  EXPECT_EQ(m.confusion[2][2], 1);
  EXPECT_EQ(m.confusion[2][1], 1);
}

}  // namespace
}  // namespace keel::predictor
