// ResponseEvents: the Responses stream for a text answer then a function call — every event
// type in OpenAI's order, sequence numbers 0, 1, 2, ... without gaps, deltas that add up to the
// done events' text and arguments, output indexes — and the same output items when nothing is
// emitted (the non-streamed response).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/responses_events.h"

namespace keel::server {
namespace {

// The data payloads of "event: T\ndata: J\n\n" frames; checks each event line names its type.
std::vector<OrderedJson> frames(const std::string& sse) {
  std::vector<OrderedJson> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    const std::string frame = sse.substr(pos, end - pos);
    const size_t nl = frame.find('\n');
    const std::string type = frame.substr(7, nl - 7);  // after "event: "
    EXPECT_EQ(frame.substr(nl + 1, 6), "data: ");
    OrderedJson j = OrderedJson::parse(frame.substr(nl + 7));
    EXPECT_EQ(j["type"], type);
    out.push_back(std::move(j));
    pos = end + 2;
  }
  return out;
}

std::string run(ResponseEvents& e) {
  const OrderedJson in_progress = {{"id", "resp_k"}, {"status", "in_progress"}};
  std::string sse = e.start(in_progress);
  e.text("Hel", &sse);
  e.text("lo", &sse);
  e.call_start("call_1", "add", &sse);
  e.call_arguments("{\"a\":", &sse);
  e.call_arguments("1}", &sse);
  e.close(&sse);
  sse += e.end({{"id", "resp_k"}, {"status", "completed"}, {"output", e.output()}});
  return sse;
}

TEST(ResponsesEventsTest, StreamsTextThenACallInOrder) {
  ResponseEvents e("k", /*emit=*/true);
  const std::vector<OrderedJson> ev = frames(run(e));
  std::vector<std::string> types;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["sequence_number"], i);
    types.push_back(ev[i]["type"].get<std::string>());
  }
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done",
                                             "response.completed"};
  ASSERT_EQ(types, expected);
  EXPECT_EQ(ev[2]["item"]["status"], "in_progress");
  EXPECT_EQ(ev[2]["item"]["id"], "msg_k_0");
  EXPECT_EQ(ev[4]["item_id"], "msg_k_0");
  EXPECT_EQ(ev[6]["text"], "Hello");
  EXPECT_EQ(ev[8]["item"]["content"][0]["text"], "Hello");
  EXPECT_EQ(ev[9]["output_index"], 1);
  EXPECT_EQ(ev[9]["item"]["type"], "function_call");
  EXPECT_EQ(ev[9]["item"]["call_id"], "call_1");
  EXPECT_EQ(ev[9]["item"]["arguments"], "");
  EXPECT_EQ(ev[12]["arguments"], "{\"a\":1}");
  EXPECT_EQ(ev[12]["name"], "add");
  EXPECT_EQ(ev[13]["item"]["status"], "completed");
  EXPECT_EQ(ev[14]["response"]["output"].size(), 2u);
}

TEST(ResponsesEventsTest, WithoutEmittingOnlyTheOutputIsBuilt) {
  ResponseEvents quiet("k", /*emit=*/false);
  EXPECT_EQ(run(quiet), "");
  ResponseEvents loud("k", /*emit=*/true);
  (void)run(loud);
  EXPECT_EQ(quiet.output(), loud.output());
  ASSERT_EQ(quiet.output().size(), 2u);
  EXPECT_EQ(quiet.output()[0]["content"][0]["text"], "Hello");
  EXPECT_EQ(quiet.output()[1]["arguments"], "{\"a\":1}");
}

TEST(ResponsesEventsTest, ThinkingIsAReasoningItem) {
  ResponseEvents e("k", /*emit=*/true);
  std::string sse;
  e.reasoning("hmm", &sse);
  e.text("Hi", &sse);
  e.close(&sse);
  const std::vector<OrderedJson> ev = frames(sse);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0]["item"]["type"], "reasoning");
  EXPECT_EQ(ev[1]["type"], "response.reasoning_text.delta");
  EXPECT_EQ(ev[2]["type"], "response.reasoning_text.done");
  EXPECT_EQ(e.output()[0]["content"][0]["text"], "hmm");
  EXPECT_EQ(e.output()[1]["id"], "msg_k_1");
}

}  // namespace
}  // namespace keel::server
