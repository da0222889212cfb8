// StepCostModel: the least-squares fit recovers a known linear cost, follows a change of speed,
// and the prefill budget keeps the predicted step within the target (clamped at both ends).
#include "engine/step_cost_model.h"

#include <gtest/gtest.h>

#include <random>

namespace keel::engine {
namespace {

// A machine whose steps cost 20 ms + 4 ms per prompt token + 1 ms per decode, ±2 % noise.
double step_seconds(std::mt19937& rng, int32_t prefill, int32_t decodes, double scale = 1.0) {
  std::uniform_real_distribution<double> noise(0.98, 1.02);
  return scale * (0.020 + 0.004 * prefill + 0.001 * decodes) * noise(rng);
}

TEST(StepCostModelTest, RecoversALinearCostAndSizesTheBudget) {
  StepCostModel m;
  std::mt19937 rng(1);
  std::uniform_int_distribution<int32_t> p(0, 200), d(0, 16);
  EXPECT_FALSE(m.ready());
  EXPECT_EQ(m.prefill_budget(4, 0.1, 16, 512), 512) << "no limit before it has measurements";
  for (int i = 0; i < 200; ++i) {
    const int32_t pp = i % 3 == 0 ? 0 : p(rng), dd = d(rng);
    m.observe(pp, dd, step_seconds(rng, pp, dd));
  }
  ASSERT_TRUE(m.ready());
  EXPECT_NEAR(m.predict(0, 8), 0.028, 0.002);
  EXPECT_NEAR(m.predict(100, 8), 0.428, 0.01);
  // 8 decodes (28 ms) within 100 ms leave 72 ms: 18 prompt tokens.
  EXPECT_NEAR(m.prefill_budget(8, 0.100, 1, 512), 18, 1);
  EXPECT_EQ(m.prefill_budget(8, 0.010, 16, 512), 16) << "clamped to the minimum chunk";
  EXPECT_EQ(m.prefill_budget(8, 100.0, 16, 512), 512) << "clamped to the token budget";
}

TEST(StepCostModelTest, FollowsTheMachineWhenItSlowsDown) {
  StepCostModel m;
  std::mt19937 rng(2);
  for (int i = 0; i < 100; ++i) m.observe(i % 2 * 50, 4, step_seconds(rng, i % 2 * 50, 4));
  const double before = m.predict(50, 4);
  for (int i = 0; i < 300; ++i) m.observe(i % 2 * 50, 4, step_seconds(rng, i % 2 * 50, 4, 2.0));
  EXPECT_NEAR(m.predict(50, 4) / before, 2.0, 0.1);
}

TEST(StepCostModelTest, IgnoresNonsenseDurations) {
  StepCostModel m;
  m.observe(10, 1, -1.0);
  m.observe(10, 1, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(m.num_observed(), 0);
}

}  // namespace
}  // namespace keel::engine
