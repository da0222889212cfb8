#include "sampling/logit_processors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace keel::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(LogitBiasTest, AddsBiasToListedIdsOnly) {
  std::vector<float> logits = {0.5f, -1.0f, 2.0f, 3.0f};
  const std::vector<std::pair<int32_t, float>> bias = {{1, 2.5f}, {3, -kInf}, {1, 0.25f}};
  apply_logit_bias(logits, bias);
  EXPECT_FLOAT_EQ(logits[0], 0.5f);
  EXPECT_FLOAT_EQ(logits[1], -1.0f + 2.5f + 0.25f);  // repeated ids add up
  EXPECT_FLOAT_EQ(logits[2], 2.0f);
  EXPECT_EQ(logits[3], -kInf);
}

TEST(PenaltiesTest, RepetitionDividesPositiveAndMultipliesNegative) {
  TokenHistory h;
  const std::vector<int32_t> prompt = {0, 1};
  h.set_prompt(prompt);
  h.add_output(2);
  h.add_output(2);
  std::vector<float> logits = {2.0f, -2.0f, 3.0f, 4.0f, -1.0f};
  apply_penalties(logits, h, 2.0f, 0.0f, 0.0f);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);   // prompt, positive: divided
  EXPECT_FLOAT_EQ(logits[1], -4.0f);  // prompt, negative: multiplied
  EXPECT_FLOAT_EQ(logits[2], 1.5f);   // output (twice): applied once, not per occurrence
  EXPECT_FLOAT_EQ(logits[3], 4.0f);   // unseen
  EXPECT_FLOAT_EQ(logits[4], -1.0f);  // unseen
}

TEST(PenaltiesTest, PresenceAndFrequencyFollowOpenAiOverOutputOnly) {
  TokenHistory h;
  const std::vector<int32_t> prompt = {0};
  h.set_prompt(prompt);
  for (int32_t t : {1, 2, 2, 2}) h.add_output(t);
  std::vector<float> logits = {1.0f, 1.0f, 1.0f, 1.0f};
  const float presence = 0.5f;
  const float frequency = 0.3f;
  apply_penalties(logits, h, 1.0f, presence, frequency);
  EXPECT_FLOAT_EQ(logits[0], 1.0f);  // prompt only: additive penalties do not apply
  EXPECT_FLOAT_EQ(logits[1], 1.0f - presence - frequency * 1);
  EXPECT_FLOAT_EQ(logits[2], 1.0f - presence - frequency * 3);
  EXPECT_FLOAT_EQ(logits[3], 1.0f);
}

TEST(PenaltiesTest, NegativeAdditivePenaltiesEncourage) {
  TokenHistory h;
  h.add_output(0);
  std::vector<float> logits = {1.0f, 1.0f};
  apply_penalties(logits, h, 1.0f, -1.0f, -0.5f);
  EXPECT_FLOAT_EQ(logits[0], 2.5f);
  EXPECT_FLOAT_EQ(logits[1], 1.0f);
}

TEST(PenaltiesTest, RepetitionThenAdditive) {
  TokenHistory h;
  h.add_output(0);
  std::vector<float> logits = {3.0f};
  apply_penalties(logits, h, 1.5f, 0.5f, 0.25f);
  EXPECT_FLOAT_EQ(logits[0], 3.0f / 1.5f - 0.5f - 0.25f);
}

TEST(PenaltiesTest, NeutralLeavesLogitsUntouched) {
  TokenHistory h;
  h.add_output(0);
  std::vector<float> logits = {3.0f, -2.0f};
  apply_penalties(logits, h, 1.0f, 0.0f, 0.0f);
  EXPECT_EQ(logits, (std::vector<float>{3.0f, -2.0f}));
}

}  // namespace
}  // namespace keel::sampling
