// AdamW (adamw.h): one step against the formula (bias correction, decoupled weight decay),
// global-norm clipping, the warm-up + linear / cosine schedule, convergence on a quadratic, and
// config validation.
#include "train/adamw.h"

#include <gtest/gtest.h>

#include <cmath>

namespace keel::train {
namespace {

TEST(AdamW, OneStepFollowsTheFormula) {
  OptimizerConfig c;
  c.learning_rate = 0.1;
  c.weight_decay = 0.01;
  c.max_grad_norm = 0.0;
  c.decay = LrDecay::kConstant;
  AdamW adam(c, 1);
  std::vector<float> p = {1.0f}, g = {0.5f};
  adam.step(p, g, 10);
  // m̂ = 0.5, v̂ = 0.25: update = 0.5 / (0.5 + 1e-8) + 0.01 · 1.
  EXPECT_NEAR(p[0], 1.0 - 0.1 * (0.5 / (0.5 + 1e-8) + 0.01), 1e-6);
  g = {-0.25f};
  adam.step(p, g, 10);
  const double m = 0.9 * 0.05 + 0.1 * -0.25, v = 0.999 * 0.00025 + 0.001 * 0.0625;
  const double m_hat = m / (1 - 0.81), v_hat = v / (1 - 0.999 * 0.999);
  const double want = 0.899 - 0.1 * (m_hat / (std::sqrt(v_hat) + 1e-8) + 0.01 * 0.899);
  EXPECT_NEAR(p[0], want, 1e-6);
  EXPECT_EQ(adam.steps(), 2);
}

TEST(AdamW, ClipsTheGlobalNorm) {
  OptimizerConfig c;
  c.max_grad_norm = 1.0;
  AdamW adam(c, 2);
  std::vector<float> p = {0.0f, 0.0f}, g = {3.0f, 4.0f};
  const OptimizerStep s = adam.step(p, g, 1);
  EXPECT_DOUBLE_EQ(s.grad_norm, 5.0);
  EXPECT_TRUE(s.clipped);
  EXPECT_FLOAT_EQ(g[0], 0.6f);
  EXPECT_FLOAT_EQ(g[1], 0.8f);
  std::vector<float> small = {0.3f, 0.4f};
  EXPECT_FALSE(adam.step(p, small, 2).clipped);
}

TEST(AdamW, WarmUpThenDecay) {
  OptimizerConfig c;
  c.learning_rate = 1.0;
  c.warmup_steps = 3;
  c.decay = LrDecay::kLinear;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 0, 13), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 2, 13), 0.75);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 3, 13), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 8, 13), 1.0 - 5.0 / 9.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 12, 13), 0.0);
  c.decay = LrDecay::kCosine;
  c.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 3, 13), 1.0);
  EXPECT_NEAR(learning_rate_at(c, 12, 13), 0.1, 1e-12);
  c.decay = LrDecay::kConstant;
  EXPECT_DOUBLE_EQ(learning_rate_at(c, 12, 13), 1.0);
}

TEST(AdamW, MinimisesAQuadratic) {
  OptimizerConfig c;
  c.learning_rate = 0.05;
  c.decay = LrDecay::kConstant;
  AdamW adam(c, 3);
  std::vector<float> p = {3.0f, -2.0f, 0.5f};
  const float target[] = {1.0f, 1.0f, -1.0f};
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> g(3);
    for (size_t j = 0; j < 3; ++j) g[j] = 2.0f * (p[j] - target[j]);
    adam.step(p, g, 2000);
  }
  for (size_t j = 0; j < 3; ++j) EXPECT_NEAR(p[j], target[j], 1e-2);
}

TEST(AdamW, RefusesBadConfigs) {
  OptimizerConfig c;
  EXPECT_TRUE(c.validate().ok());
  c.learning_rate = 0;
  EXPECT_FALSE(c.validate().ok());
  c = {};
  c.beta2 = 1.0;
  EXPECT_FALSE(c.validate().ok());
  c = {};
  c.min_lr_ratio = 2;
  EXPECT_FALSE(c.validate().ok());
}

}  // namespace
}  // namespace keel::train
