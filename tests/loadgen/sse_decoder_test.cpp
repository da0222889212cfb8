// SseDecoder: events split across reads at every byte, data with and without the space, comments,
// CRLF / CR line ends, multi-line data, unterminated final events and the size limit.
#include "loadgen/sse_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace keel::loadgen {
namespace {

std::vector<SseEvent> decode_all(const std::vector<std::string>& pieces, bool finish = true) {
  SseDecoder d;
  std::vector<SseEvent> out;
  for (const std::string& p : pieces) EXPECT_TRUE(d.feed(p, &out).ok());
  if (finish) d.finish(&out);
  return out;
}

std::vector<std::string> data_of(const std::vector<SseEvent>& events) {
  std::vector<std::string> out;
  for (const SseEvent& e : events) out.push_back(e.data);
  return out;
}

const std::string kStream =
    ": ping\n\n"
    "data: {\"a\":1}\n\n"
    "data:{\"b\":2}\n\n"
    ": another comment\n"
    "data: [DONE]\n\n";
const std::vector<std::string> kExpected = {"{\"a\":1}", "{\"b\":2}", "[DONE]"};

TEST(SseDecoderTest, WholeStreamInOneRead) { EXPECT_EQ(data_of(decode_all({kStream})), kExpected); }

TEST(SseDecoderTest, EverySplitPointGivesTheSameEvents) {
  for (size_t cut = 0; cut <= kStream.size(); ++cut) {
    auto events = decode_all({kStream.substr(0, cut), kStream.substr(cut)});
    EXPECT_EQ(data_of(events), kExpected) << "cut at " << cut;
  }
}

TEST(SseDecoderTest, ByteByByte) {
  std::vector<std::string> pieces;
  for (char c : kStream) pieces.emplace_back(1, c);
  EXPECT_EQ(data_of(decode_all(pieces)), kExpected);
}

TEST(SseDecoderTest, EventsAreEmittedOnlyWhenTheirBlankLineArrives) {
  SseDecoder d;
  std::vector<SseEvent> out;
  ASSERT_TRUE(d.feed("data: {\"x\":", &out).ok());
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(d.feed("1}\n", &out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_GT(d.pending_bytes(), 0u);
  ASSERT_TRUE(d.feed("\n", &out).ok());
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "{\"x\":1}");
  EXPECT_EQ(d.pending_bytes(), 0u);
}

TEST(SseDecoderTest, CrlfAndCrLineEnds) {
  EXPECT_EQ(data_of(decode_all({"data: a\r\n\r\ndata: b\r\rdata: c\n\n"})),
            (std::vector<std::string>{"a", "b", "c"}));
  // A CR at the end of one read followed by LF at the start of the next is one line end.
  EXPECT_EQ(data_of(decode_all({"data: a\r", "\n\r", "\ndata: b\r\n\r\n"})),
            (std::vector<std::string>{"a", "b"}));
}

TEST(SseDecoderTest, CommentOnlyEventsAreDropped) {
  EXPECT_TRUE(decode_all({": ping\n\n: ping\n\n"}).empty());
}

TEST(SseDecoderTest, MultiLineDataJoinsWithNewline) {
  EXPECT_EQ(data_of(decode_all({"data: line1\ndata:line2\n\n"})),
            (std::vector<std::string>{"line1\nline2"}));
}

TEST(SseDecoderTest, OnlyOneLeadingSpaceIsStripped) {
  EXPECT_EQ(data_of(decode_all({"data:  two\n\n"})), (std::vector<std::string>{" two"}));
}

TEST(SseDecoderTest, EventNameIsKeptAndOtherFieldsIgnored) {
  auto events = decode_all({"id: 7\nevent: error\nretry: 10\ndata: {}\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "error");
  EXPECT_EQ(events[0].data, "{}");
}

TEST(SseDecoderTest, FinishFlushesAnUnterminatedEvent) {
  EXPECT_EQ(data_of(decode_all({"data: a\n\ndata: [DONE]"})),
            (std::vector<std::string>{"a", "[DONE]"}));
  EXPECT_EQ(data_of(decode_all({"data: [DONE]\n"})), (std::vector<std::string>{"[DONE]"}));
  EXPECT_TRUE(decode_all({"data: x"}, /*finish=*/false).empty());
}

TEST(SseDecoderTest, OversizedEventFailsAndStaysFailed) {
  SseDecoder d;
  std::vector<SseEvent> out;
  const std::string big(SseDecoder::kMaxEventBytes / 4, 'x');
  Status st;
  for (int i = 0; i < 5 && st.ok(); ++i) st = d.feed("data: " + big + "\n", &out);
  EXPECT_FALSE(st.ok());
  EXPECT_FALSE(d.feed("\n", &out).ok());
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace keel::loadgen
