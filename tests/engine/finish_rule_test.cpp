// The finish rule every engine kind shares (engine/finish_rule.h), and the submit checks
// (engine/request_checks.h): the order of the reasons (a stop string first, then end of
// generation and stop ids, then length and the full context; a stop string completed by the
// flush at the end), ignore_eos, and the refusals with their messages.
#include "engine/finish_rule.h"

#include <gtest/gtest.h>

#include "../tokenizer/synthetic_vocab.h"
#include "engine/request_checks.h"

namespace keel::engine {
namespace {

constexpr int32_t kEog = 2;

GenerationRequest request(int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = {5, 6, 7};
  r.max_tokens = max_tokens;
  return r;
}

std::optional<FinishReason> check(const GenerationRequest& r, int32_t generated, int32_t token,
                                  int64_t max_model_len = 100) {
  const std::vector<int32_t> eog = {kEog};
  TokenEvent ev;
  return finish_rule({&r, generated, eog, max_model_len, nullptr}, token, &ev);
}

TEST(FinishRuleTest, EndOfGenerationStopIdsThenLengthThenTheContext) {
  GenerationRequest r = request(4);
  EXPECT_EQ(check(r, 1, 9), std::nullopt);
  EXPECT_EQ(check(r, 1, kEog), FinishReason::kStop);
  EXPECT_EQ(check(r, 4, kEog), FinishReason::kStop);  // a stop at the last token is a stop
  EXPECT_EQ(check(r, 4, 9), FinishReason::kLength);
  EXPECT_EQ(check(r, 2, 9, /*max_model_len=*/5), FinishReason::kLength);  // 3 + 2 fill it
  r.stop_token_ids = {9};
  EXPECT_EQ(check(r, 1, 9), FinishReason::kStop);
  r.stop_token_ids.clear();
  r.ignore_eos = true;
  EXPECT_EQ(check(r, 1, kEog), std::nullopt);
  EXPECT_EQ(check(r, 4, kEog), FinishReason::kLength);
}

TEST(FinishRuleTest, AStopStringWinsAndTheFlushAtTheEndCanCompleteOne) {
  tokenizer::testing::SyntheticVocab v = tokenizer::testing::spm_base();
  const int32_t st = v.add("ST"), op = v.add("OP");
  auto tok = tokenizer::testing::load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  GenerationRequest r = request(2);
  const std::vector<int32_t> eog = {kEog};
  {
    StopStringDetector stops(*tok, {"STOP"});
    TokenEvent ev;
    EXPECT_EQ(finish_rule({&r, 1, eog, 100, &stops}, st, &ev), std::nullopt);
    // The token completing the stop string is also the last one max_tokens allows: a stop.
    EXPECT_EQ(finish_rule({&r, 2, eog, 100, &stops}, op, &ev), FinishReason::kStop);
    EXPECT_EQ(ev.stop_string, 0);
  }
  {
    StopStringDetector stops(*tok, {"XY"});
    TokenEvent ev;
    EXPECT_EQ(finish_rule({&r, 2, eog, 100, &stops}, st, &ev), FinishReason::kLength);
    EXPECT_EQ(ev.stop_string, std::nullopt);
  }
}

TEST(RequestChecksTest, RefusalsNameWhatIsWrong) {
  const RequestLimits limits{32, /*has_tokenizer=*/false, /*max_model_len=*/10};
  EXPECT_TRUE(check_request(request(4), limits).ok());
  GenerationRequest r = request(4);
  r.prompt_tokens.push_back(32);
  EXPECT_NE(check_request(r, limits).message().find("outside the vocabulary"), std::string::npos);
  r = request(8);  // 3 + 8 > 10
  const Status s = check_request(r, limits);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("maximum context length is 10"), std::string::npos);
  r = request(4);
  r.stop_strings = {"x"};
  EXPECT_NE(check_request(r, limits).message().find("tokenizer"), std::string::npos);
  r = request(4);
  r.sampling.temperature = -1;
  EXPECT_FALSE(check_request(r, limits).ok());
  EXPECT_TRUE(check_waiting(3, 4).ok());
  EXPECT_EQ(check_waiting(4, 4).code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace keel::engine
