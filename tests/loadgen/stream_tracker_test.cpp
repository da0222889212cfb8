// StreamTracker on synthetic timelines: TTFT from the first non-empty-choices chunk, ITL per later
// chunk, E2E at the last content chunk (chat: the usage chunk too), token counts from usage, and
// every failure path (error payload, malformed data, no [DONE], no content, transport error).
#include "loadgen/stream_tracker.h"

#include <gtest/gtest.h>

#include <string>

namespace keel::loadgen {
namespace {

std::string text_chunk(const std::string& t) {
  return "data: {\"choices\":[{\"index\":0,\"text\":\"" + t + "\"}],\"usage\":null}\n\n";
}
std::string chat_chunk(const std::string& t) {
  return "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + t + "\"}}]}\n\n";
}
const std::string kUsage =
    "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":3}}\n\n";
const std::string kDone = "data: [DONE]\n\n";

TEST(StreamTrackerTest, CompletionTimeline) {
  StreamTracker t(/*send_s=*/1.0, /*chat=*/false, /*keep_text=*/true);
  t.on_bytes(": ping\n\n", 1.2);  // a comment is not a token
  t.on_bytes(text_chunk("a"), 1.5);
  const std::string second = text_chunk("b");
  t.on_bytes(second.substr(0, 10), 1.6);  // split: the event completes at 1.65
  t.on_bytes(second.substr(10), 1.65);
  t.on_bytes(text_chunk("c") + kUsage, 1.9);
  EXPECT_FALSE(t.finished());
  t.on_bytes(kDone, 2.0);
  EXPECT_TRUE(t.finished());
  EXPECT_TRUE(t.saw_done());
  RequestRecord r;
  t.fill(&r);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.start_s, 1.0);
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.5);
  ASSERT_EQ(r.itl_s.size(), 2u);
  EXPECT_NEAR(r.itl_s[0], 0.15, 1e-12);
  EXPECT_NEAR(r.itl_s[1], 0.25, 1e-12);
  EXPECT_NEAR(r.latency_s, 0.9, 1e-12);  // last content chunk, not [DONE] at 2.0
  EXPECT_EQ(r.num_content_chunks, 3);
  EXPECT_EQ(r.usage_completion_tokens, 3);
  EXPECT_EQ(r.usage_prompt_tokens, 7);
  EXPECT_EQ(r.generated_text, "abc");
}

TEST(StreamTrackerTest, ChatUsageChunkMovesTheEndTime) {
  StreamTracker t(0.0, /*chat=*/true, /*keep_text=*/false);
  t.on_bytes("data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
             0.1);
  t.on_bytes(chat_chunk("x"), 0.3);
  t.on_bytes(kUsage, 0.4);
  t.on_bytes(kDone, 0.5);
  RequestRecord r;
  t.fill(&r);
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_DOUBLE_EQ(r.ttft_s, 0.1);  // the role chunk has non-empty choices
  EXPECT_DOUBLE_EQ(r.latency_s, 0.4);
  ASSERT_EQ(r.itl_s.size(), 1u);
  EXPECT_DOUBLE_EQ(r.itl_s[0], 0.3 - 0.1);
  EXPECT_TRUE(r.generated_text.empty());  // not kept
}

TEST(StreamTrackerTest, BytesAfterDoneAreIgnored) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(text_chunk("a") + kDone + "data: {garbage\n\n" + text_chunk("z"), 0.2);
  RequestRecord r;
  t.fill(&r);
  EXPECT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.num_content_chunks, 1);
}

TEST(StreamTrackerTest, ErrorPayloadFailsWithTheServersMessage) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(text_chunk("a"), 0.1);
  t.on_bytes("data: {\"error\":{\"message\":\"engine died\",\"code\":500}}\n\n", 0.2);
  EXPECT_TRUE(t.failed());
  t.on_bytes(kDone, 0.3);
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("engine died"), std::string::npos) << r.error;
}

TEST(StreamTrackerTest, MalformedDataFails) {
  StreamTracker t(0.0, false, false);
  t.on_bytes("data: {\"choices\": [\n\n", 0.1);
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("malformed SSE data"), std::string::npos) << r.error;
}

TEST(StreamTrackerTest, EndWithoutDoneFails) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(text_chunk("a") + text_chunk("b"), 0.1);
  t.on_end_of_body(0.2);
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("before [DONE] after 2 content chunks"), std::string::npos) << r.error;
}

TEST(StreamTrackerTest, UnterminatedDoneAtEndOfBodyStillCounts) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(text_chunk("a") + "data: [DONE]", 0.1);
  t.on_end_of_body(0.2);
  RequestRecord r;
  t.fill(&r);
  EXPECT_TRUE(r.success) << r.error;
}

TEST(StreamTrackerTest, NonSseBodyFailsWithAHint) {
  StreamTracker t(0.0, false, false);
  t.on_bytes("{\"choices\":[{\"text\":\"whole answer\"}]}", 0.1);
  t.on_end_of_body(0.2);
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("no SSE data events"), std::string::npos) << r.error;
}

TEST(StreamTrackerTest, DoneWithoutContentFails) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(kUsage + kDone, 0.1);
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("non-empty choices"), std::string::npos) << r.error;
}

TEST(StreamTrackerTest, HangUpIsCancelledNotFailed) {
  StreamTracker t(0.0, false, false);
  t.on_bytes(text_chunk("a") + text_chunk("b"), 0.5);
  EXPECT_EQ(t.num_content_chunks(), 2);
  t.cancel();
  EXPECT_TRUE(t.finished());
  t.fail("read: operation canceled");  // the close's own error is not a failure
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_TRUE(r.cancelled);
  EXPECT_EQ(r.error, "");
  // A request that completed (or failed) first stays what it was.
  StreamTracker done(0.0, false, false);
  done.on_bytes(text_chunk("a") + kDone, 0.5);
  done.cancel();
  done.fill(&r);
  EXPECT_TRUE(r.success);
  EXPECT_FALSE(r.cancelled);
}

TEST(StreamTrackerTest, FirstTransportErrorWins) {
  StreamTracker t(0.0, false, false);
  t.fail("read: connection reset");
  t.fail("second");
  RequestRecord r;
  t.fill(&r);
  EXPECT_FALSE(r.success);
  EXPECT_EQ(r.error, "read: connection reset");
}

}  // namespace
}  // namespace keel::loadgen
