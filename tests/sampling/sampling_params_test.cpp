#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

namespace keel::sampling {
namespace {

constexpr int32_t kVocab = 100;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Expects `mutate` applied to default params to fail validation with a message naming `param`.
void expect_rejected(const std::function<void(SamplingParams&)>& mutate, const std::string& param) {
  SamplingParams p;
  mutate(p);
  const Status s = p.validate(kVocab);
  ASSERT_FALSE(s.ok()) << "expected " << param << " to be rejected";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(param), std::string::npos) << s.message();
}

void expect_accepted(const std::function<void(SamplingParams&)>& mutate) {
  SamplingParams p;
  mutate(p);
  const Status s = p.validate(kVocab);
  EXPECT_TRUE(s.ok()) << s.to_string();
}

TEST(SamplingParamsTest, DefaultsAreValidAndNeutral) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(kVocab).ok());
  EXPECT_FALSE(p.is_greedy());
  EXPECT_FALSE(p.has_penalties());
}

TEST(SamplingParamsTest, RejectsBadTemperature) {
  expect_rejected([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.temperature = kNaN; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.temperature = kInf; }, "temperature");
  expect_accepted([](SamplingParams& p) { p.temperature = 0.0f; });
  expect_accepted([](SamplingParams& p) { p.temperature = 5.0f; });
}

TEST(SamplingParamsTest, RejectsBadTopK) {
  expect_rejected([](SamplingParams& p) { p.top_k = -2; }, "top_k");
  expect_accepted([](SamplingParams& p) { p.top_k = -1; });
  expect_accepted([](SamplingParams& p) { p.top_k = 0; });
  expect_accepted([](SamplingParams& p) { p.top_k = 1000; });  // larger than vocab: no-op
}

TEST(SamplingParamsTest, RejectsBadTopP) {
  expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = kNaN; }, "top_p");
  expect_accepted([](SamplingParams& p) { p.top_p = 1e-6f; });
}

TEST(SamplingParamsTest, RejectsBadMinP) {
  expect_rejected([](SamplingParams& p) { p.min_p = -0.01f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.min_p = kNaN; }, "min_p");
  expect_accepted([](SamplingParams& p) { p.min_p = 1.0f; });
}

TEST(SamplingParamsTest, RejectsBadPenalties) {
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = kInf; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = 2.5f; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = -2.01f; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = kNaN; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = 3.0f; }, "frequency_penalty");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = -kInf; }, "frequency_penalty");
  expect_accepted([](SamplingParams& p) {
    p.presence_penalty = -2.0f;
    p.frequency_penalty = 2.0f;
    p.repetition_penalty = 1.3f;
  });
}

TEST(SamplingParamsTest, RejectsBadLogitBias) {
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{3, kNaN}}; }, "logit_bias");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{3, kInf}}; }, "logit_bias");
  expect_accepted([](SamplingParams& p) { p.logit_bias = {{0, -kInf}, {kVocab - 1, 100.0f}}; });
  // The message names the offending id and the vocabulary bound.
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}, {150, 2.0f}};
  const Status s = p.validate(kVocab);
  EXPECT_NE(s.message().find("150"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("100"), std::string::npos) << s.message();
}

TEST(SamplingParamsTest, RejectsBadLogprobsAndVocab) {
  expect_rejected([](SamplingParams& p) { p.logprobs = 21; }, "logprobs");
  expect_rejected([](SamplingParams& p) { p.logprobs = -1; }, "logprobs");
  expect_accepted([](SamplingParams& p) { p.logprobs = 20; });
  expect_accepted([](SamplingParams& p) { p.logprobs = 0; });
  EXPECT_FALSE(SamplingParams().validate(0).ok());
}

TEST(SamplingParamsTest, MessageNamesTheValue) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_NE(p.validate(kVocab).message().find("1.5"), std::string::npos);
}

TEST(SamplingParamsTest, TinyTemperatureIsGreedy) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 1e-6f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 0.01f;
  EXPECT_FALSE(p.is_greedy());
}

}  // namespace
}  // namespace keel::sampling
