// ChoiceOutput: incremental text from token events, stop strings across token boundaries (the
// caller is told to abort; later events are dropped), finish reasons, logprob entries and
// UTF-8-safe release of byte-fallback tokens.
#include "server/choice_output.h"

#include <gtest/gtest.h>

#include "server_harness.h"

namespace keel::server {
namespace {

using testing::byte_token;
using testing::kBang;
using testing::kEnd;
using testing::kEos;
using testing::kHello;
using testing::kMore;
using testing::kOp;
using testing::kSt;
using testing::kThe;
using testing::kWorld;

engine::TokenEvent tokens(std::vector<int32_t> ids,
                          std::optional<engine::FinishReason> finish = std::nullopt) {
  engine::TokenEvent ev;
  ev.tokens = std::move(ids);
  ev.finish = finish;
  ev.num_prompt_tokens = 7;
  ev.num_cached_tokens = 3;
  return ev;
}

class ChoiceOutputTest : public ::testing::Test {
 protected:
  tokenizer::Tokenizer tok_ = testing::make_test_tokenizer();
};

TEST_F(ChoiceOutputTest, DecodesTokenByTokenAndFinishes) {
  ChoiceOutput out(tok_, {.accumulate = true});
  ChoiceDelta a = out.consume(tokens({kHello}));
  EXPECT_TRUE(a.first_tokens);
  EXPECT_EQ(a.text, " Hello");  // generated text continues the prompt: it keeps its space
  ChoiceDelta b = out.consume(tokens({kWorld, kBang}));
  EXPECT_FALSE(b.first_tokens);
  EXPECT_EQ(b.text, " world!");
  ChoiceDelta c = out.consume(tokens({kEos}, engine::FinishReason::kStop));
  EXPECT_EQ(c.text, "");
  EXPECT_EQ(c.finish, "stop");
  EXPECT_TRUE(out.finished());
  EXPECT_EQ(out.text(), " Hello world!");
  EXPECT_EQ(out.num_generated(), 4);
  EXPECT_EQ(out.num_prompt_tokens(), 7);
  EXPECT_EQ(out.num_cached_tokens(), 3);
  EXPECT_FALSE(out.stop_reason().has_value());
}

TEST_F(ChoiceOutputTest, LengthFinish) {
  ChoiceOutput out(tok_, {});
  ChoiceDelta d = out.consume(tokens({kHello, kWorld}, engine::FinishReason::kLength));
  EXPECT_EQ(d.text, " Hello world");
  EXPECT_EQ(d.finish, "length");
}

TEST_F(ChoiceOutputTest, StopStringSplitAcrossTokensIsNeverReleased) {
  ChoiceOutput out(tok_, {.stops = {"STOP"}, .accumulate = true});
  std::string streamed;
  ChoiceDelta d = out.consume(tokens({kThe}));
  streamed += d.text;
  d = out.consume(tokens({kEnd}));
  streamed += d.text;
  d = out.consume(tokens({kSt}));  // "ST" may begin "STOP": held back
  EXPECT_EQ(d.text, "");
  streamed += d.text;
  d = out.consume(tokens({kOp, kMore}));  // completes the stop string; kMore is dropped
  streamed += d.text;
  EXPECT_TRUE(d.stopped_by_string);
  EXPECT_EQ(d.finish, "stop");
  EXPECT_EQ(streamed, " The end");
  EXPECT_EQ(out.text(), " The end");
  EXPECT_EQ(out.stop_reason(), "STOP");
  EXPECT_EQ(out.num_generated(), 4);
  // The engine's answer to the abort (and anything else) is discarded.
  ChoiceDelta late = out.consume(tokens({}, engine::FinishReason::kAbort));
  EXPECT_TRUE(late.empty());
  EXPECT_EQ(out.finish_reason(), "stop");
  EXPECT_FALSE(out.error().has_value());
}

TEST_F(ChoiceOutputTest, HeldBackPrefixIsReleasedAtTheEnd) {
  ChoiceOutput out(tok_, {.stops = {"STOP"}, .accumulate = true});
  EXPECT_EQ(out.consume(tokens({kThe, kSt})).text, " The");
  ChoiceDelta d = out.consume(tokens({}, engine::FinishReason::kLength));
  EXPECT_EQ(d.text, "ST");
  EXPECT_EQ(d.finish, "length");
  EXPECT_FALSE(d.stopped_by_string);
  EXPECT_EQ(out.text(), " TheST");
}

TEST_F(ChoiceOutputTest, MultiByteCharacterIsReleasedWhole) {
  ChoiceOutput out(tok_, {.accumulate = true});
  EXPECT_EQ(out.consume(tokens({byte_token(0xC3)})).text, "");
  EXPECT_EQ(out.consume(tokens({byte_token(0xA9)})).text, "\xC3\xA9");
  out.consume(tokens({}, engine::FinishReason::kStop));
  EXPECT_EQ(out.text(), "\xC3\xA9");
}

TEST_F(ChoiceOutputTest, LogprobEntriesCarryPiecesAlternativesAndOffsets) {
  ChoiceOutput out(tok_, {.logprobs = true, .accumulate = true, .text_offset_base = 10});
  engine::TokenEvent ev = tokens({kHello, kWorld});
  ev.logprobs.push_back(testing::fake_logprobs(kHello, 0, 2));
  ev.logprobs.push_back(testing::fake_logprobs(kWorld, 1, 2));
  ChoiceDelta d = out.consume(std::move(ev));
  ASSERT_EQ(d.logprobs.size(), 2u);
  EXPECT_EQ(d.logprobs[0].chosen.token, kHello);
  EXPECT_EQ(d.logprobs[0].chosen.text, " Hello");
  EXPECT_FLOAT_EQ(d.logprobs[0].chosen.logprob, -0.125f);
  ASSERT_EQ(d.logprobs[0].top.size(), 2u);
  EXPECT_EQ(d.logprobs[0].top[1].token, kHello + 1);
  EXPECT_EQ(d.logprobs[0].top[1].text, " world");
  EXPECT_EQ(d.logprobs[0].text_offset, 10);
  EXPECT_EQ(d.logprobs[1].text_offset, 10 + 6);  // after " Hello"
  EXPECT_EQ(out.logprobs().size(), 2u);
}

TEST_F(ChoiceOutputTest, EngineAbortAndErrorBecomeErrors) {
  ChoiceOutput aborted(tok_, {});
  ChoiceDelta a = aborted.consume(tokens({kHello}, engine::FinishReason::kAbort));
  ASSERT_TRUE(a.error.has_value());
  EXPECT_TRUE(a.engine_abort);
  EXPECT_FALSE(a.finish.has_value());
  ChoiceOutput failed(tok_, {});
  engine::TokenEvent ev = tokens({}, engine::FinishReason::kError);
  ev.error = "forward pass failed";
  ChoiceDelta e = failed.consume(std::move(ev));
  EXPECT_EQ(e.error, "forward pass failed");
  EXPECT_FALSE(e.engine_abort);
}

TEST(CodePointsTest, CountsCharactersNotBytes) {
  EXPECT_EQ(count_code_points(""), 0);
  EXPECT_EQ(count_code_points("abc"), 3);
  EXPECT_EQ(count_code_points("caf\xC3\xA9"), 4);
}

}  // namespace
}  // namespace keel::server
