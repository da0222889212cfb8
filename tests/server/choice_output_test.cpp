// ChoiceOutput: incremental text from token events, the text side of stop strings the engine
// decided (held back across token boundaries, never released, cut where the engine stopped),
// finish reasons, logprob entries and UTF-8-safe release of byte-fallback tokens. A randomized
// test checks that the streamed deltas are byte for byte those of the server-side matcher keel
// had before the engine owned the decision.
#include "server/choice_output.h"

#include <gtest/gtest.h>

#include <random>

#include "engine/stop_strings.h"
#include "server_harness.h"
#include "tokenizer/stop_matcher.h"

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

// The engine's final event for a stop string: the completing token, kStop, the string's index.
engine::TokenEvent stopped_on(int32_t id, int32_t stop_index) {
  engine::TokenEvent ev = tokens({id}, engine::FinishReason::kStop);
  ev.stop_string = stop_index;
  return ev;
}

TEST_F(ChoiceOutputTest, StopStringSplitAcrossTokensIsNeverReleased) {
  ChoiceOutput out(tok_, {.stops = {"x", "STOP"}, .accumulate = true});
  std::string streamed;
  ChoiceDelta d = out.consume(tokens({kThe}));
  streamed += d.text;
  d = out.consume(tokens({kEnd}));
  streamed += d.text;
  d = out.consume(tokens({kSt}));  // "ST" may begin "STOP": held back
  EXPECT_EQ(d.text, "");
  streamed += d.text;
  d = out.consume(stopped_on(kOp, 1));  // the engine finished on the completing token
  streamed += d.text;
  EXPECT_EQ(d.finish, "stop");
  EXPECT_EQ(streamed, " The end");
  EXPECT_EQ(out.text(), " The end");
  EXPECT_EQ(out.stop_reason(), "STOP");
  EXPECT_EQ(out.num_generated(), 4);
  EXPECT_TRUE(out.finished());
  // Nothing follows a final event.
  EXPECT_TRUE(out.consume(tokens({kMore}, engine::FinishReason::kAbort)).empty());
  EXPECT_EQ(out.finish_reason(), "stop");
  EXPECT_FALSE(out.error().has_value());
}

TEST_F(ChoiceOutputTest, NeverEndsAChoiceByItself) {
  // An engine that does not stop on the string (not keel's): the text stays cut at the stop
  // string, the choice goes on until the engine finishes it, and the reason is the engine's.
  ChoiceOutput out(tok_, {.stops = {"STOP"}, .accumulate = true});
  EXPECT_EQ(out.consume(tokens({kThe, kSt, kOp})).text, " The");
  EXPECT_FALSE(out.finished());
  ChoiceDelta d = out.consume(tokens({kMore}, engine::FinishReason::kLength));
  EXPECT_EQ(d.text, "");
  EXPECT_EQ(d.finish, "length");
  EXPECT_FALSE(out.stop_reason().has_value());
  EXPECT_EQ(out.num_generated(), 4);
}

TEST_F(ChoiceOutputTest, HeldBackPrefixIsReleasedAtTheEnd) {
  ChoiceOutput out(tok_, {.stops = {"STOP"}, .accumulate = true});
  EXPECT_EQ(out.consume(tokens({kThe, kSt})).text, " The");
  ChoiceDelta d = out.consume(tokens({}, engine::FinishReason::kLength));
  EXPECT_EQ(d.text, "ST");
  EXPECT_EQ(d.finish, "length");
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

// What the server streamed before the engine owned stop strings: per event, the text its own
// matcher released, ending (and aborting) at the first completed stop string; at the engine's
// finish, the decoder's rest and the held-back tail. nullopt marks the end of the stream.
std::vector<std::string> server_side_deltas(const tokenizer::Tokenizer& tok,
                                            const std::vector<std::string>& stops,
                                            const std::vector<int32_t>& ids) {
  tokenizer::IncrementalDecoder decoder(tok, false, tokenizer::DecodePosition::kContinuation);
  tokenizer::StopMatcher matcher(stops);
  std::vector<std::string> deltas;
  for (int32_t id : ids) {
    tokenizer::StopMatcher::Output out = matcher.push(decoder.push(id));
    deltas.push_back(out.text);
    if (out.match) return deltas;
  }
  tokenizer::StopMatcher::Output out = matcher.push(decoder.finish());
  deltas.back() += out.text;
  if (!out.match) deltas.back() += matcher.flush();
  return deltas;
}

TEST_F(ChoiceOutputTest, StreamsExactlyWhatTheServerSideMatcherStreamed) {
  // Random generations over the synthetic vocabulary — words, "ST"/"OP", and byte tokens that
  // form two- and three-byte characters (or broken ones) — and stop strings cut from their text
  // at random places, so that they span token boundaries and split multi-byte characters. The
  // engine side (StopStringDetector) decides where each generation ends; the deltas must equal
  // the old server-side matcher's, byte for byte, and so must the stop reason.
  std::mt19937 rng(7);
  const std::vector<int32_t> words = {kHello, kWorld, kBang, kThe, kEnd, kSt, kOp, kMore};
  const std::vector<std::vector<uint8_t>> chars = {
      {0xC3, 0xA9}, {0xE2, 0x82, 0xAC}, {0xE6, 0x97, 0xA5}, {0xC3}, {0xA9}};
  int stopped = 0;
  for (int trial = 0; trial < 400; ++trial) {
    std::vector<int32_t> ids;
    while (ids.size() < 12) {
      if (rng() % 3 == 0) {
        for (uint8_t b : chars[rng() % chars.size()]) ids.push_back(byte_token(b));
      } else {
        ids.push_back(words[rng() % words.size()]);
      }
    }
    // The generated text as the client would see it without stop strings.
    tokenizer::IncrementalDecoder decoder(tok_, false, tokenizer::DecodePosition::kContinuation);
    std::string text;
    for (int32_t id : ids) text += decoder.push(id);
    text += decoder.finish();
    std::vector<std::string> stops;
    for (int k = 0; k < 2; ++k) {
      const size_t at = rng() % text.size();
      stops.push_back(text.substr(at, 1 + rng() % 5));
    }
    if (rng() % 4 == 0) stops.push_back("never");
    SCOPED_TRACE(::testing::PrintToString(stops));

    const std::vector<std::string> want = server_side_deltas(tok_, stops, ids);
    engine::StopStringDetector engine_side(tok_, stops);
    ChoiceOutput out(tok_, {.stops = stops, .accumulate = true});
    std::vector<std::string> got;
    for (size_t i = 0; i < ids.size() && !out.finished(); ++i) {
      engine::TokenEvent ev = tokens({ids[i]});
      ev.stop_string = engine_side.push(ids[i]);
      if (!ev.stop_string && i + 1 == ids.size()) ev.stop_string = engine_side.finish();
      if (ev.stop_string || i + 1 == ids.size()) ev.finish = engine::FinishReason::kStop;
      got.push_back(out.consume(std::move(ev)).text);
    }
    EXPECT_EQ(got, want);
    std::string want_text;
    for (const std::string& d : want) want_text += d;
    EXPECT_EQ(out.text(), want_text);
    // The reason: the first stop string the old matcher completed, if any.
    tokenizer::StopMatcher reference(stops);
    std::optional<std::string> reason;
    if (auto m = reference.push(text).match) reason = stops[*m];
    EXPECT_EQ(out.stop_reason(), reason);
    stopped += reason.has_value();
  }
  EXPECT_GT(stopped, 300);  // most cut stop strings occur, a few straddle a broken character
}

TEST(CodePointsTest, CountsCharactersNotBytes) {
  EXPECT_EQ(count_code_points(""), 0);
  EXPECT_EQ(count_code_points("abc"), 3);
  EXPECT_EQ(count_code_points("caf\xC3\xA9"), 4);
}

}  // namespace
}  // namespace keel::server
