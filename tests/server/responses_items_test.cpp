// Responses items: input normalization (ids given or made, text parts, function calls and their
// outputs, reasoning; unsupported parts and item types refused with the item's param) and the
// mapping to chat messages (instructions first, calls joining the assistant turn, outputs as tool
// messages, reasoning carried to the next assistant turn); output item shapes and output_text.
#include <gtest/gtest.h>

#include "server/responses_items.h"

namespace keel::server {
namespace {

ApiResult<OrderedJson> normalize(std::string_view text) {
  int n = 0;
  return normalize_input_items(OrderedJson::parse(text), [&n](std::string_view prefix) {
    return std::string(prefix) + std::to_string(n++);
  });
}

TEST(ResponsesItemsTest, NormalizesMessagesCallsAndOutputs) {
  ApiResult<OrderedJson> items = normalize(R"([
    {"role": "developer", "content": "Rules."},
    {"type": "message", "id": "msg_given", "role": "user",
     "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "c"}]},
    {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":1}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "3"}])");
  ASSERT_TRUE(items.ok()) << items.error().message;
  const OrderedJson& i = items.value();
  ASSERT_EQ(i.size(), 5u);
  EXPECT_EQ(i[0]["id"], "msg_0");
  EXPECT_EQ(i[0]["type"], "message");
  EXPECT_EQ(i[0]["content"][0]["type"], "input_text");
  EXPECT_EQ(i[1]["id"], "msg_given");
  EXPECT_EQ(i[1]["content"].size(), 2u);
  EXPECT_EQ(i[2]["content"][0]["type"], "output_text");
  EXPECT_EQ(i[3]["type"], "function_call");
  EXPECT_EQ(i[3]["call_id"], "call_1");
  EXPECT_EQ(i[4]["type"], "function_call_output");
  EXPECT_EQ(i[4]["output"], "3");
}

TEST(ResponsesItemsTest, RefusesWhatItCannotMap) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}])",
       "input[0].content[0].type"},
      {R"([{"role": "tool", "content": "x"}])", "input[0].role"},
      {R"([{"role": "user"}])", "input[0].content"},
      {R"(["x"])", "input[0]"},
      {R"([{"type": "item_reference", "id": "msg_1"}])", "input[0].type"},
      {R"([{"type": "web_search_call", "id": "ws_1"}])", "input[0].type"},
      {R"([{"type": "function_call", "name": "f", "arguments": "{}"}])", "input[0].call_id"},
      {R"([{"type": "function_call_output", "call_id": "c"}])", "input[0].output"},
  };
  for (const auto& [text, param] : cases) {
    ApiResult<OrderedJson> r = normalize(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().param, param) << text << ": " << r.error().message;
  }
}

TEST(ResponsesItemsTest, ChatMessagesFollowTheConversation) {
  ApiResult<OrderedJson> items = normalize(R"([
    {"role": "user", "content": "What is 1+2?"},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "hmm"}]},
    {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{\"a\":1}"},
    {"type": "function_call", "call_id": "call_2", "name": "add", "arguments": "{\"a\":2}"},
    {"type": "function_call_output", "call_id": "call_1", "output": [{"type": "input_text", "text": "3"}]},
    {"type": "function_call_output", "call_id": "call_2", "output": "4"},
    {"role": "assistant", "content": "3 and 4"},
    {"type": "function_call", "call_id": "call_3", "name": "add", "arguments": "{}"}])");
  ASSERT_TRUE(items.ok()) << items.error().message;
  ApiResult<OrderedJson> m = chat_messages("Be brief.", items.value());
  ASSERT_TRUE(m.ok());
  const OrderedJson& msgs = m.value();
  ASSERT_EQ(msgs.size(), 6u) << msgs.dump();
  EXPECT_EQ(msgs[0], OrderedJson({{"role", "system"}, {"content", "Be brief."}}));
  EXPECT_EQ(msgs[1]["role"], "user");
  EXPECT_EQ(msgs[2]["role"], "assistant");
  EXPECT_EQ(msgs[2]["reasoning_content"], "hmm");
  ASSERT_EQ(msgs[2]["tool_calls"].size(), 2u);
  EXPECT_EQ(msgs[2]["tool_calls"][1]["id"], "call_2");
  EXPECT_EQ(msgs[2]["tool_calls"][1]["function"]["arguments"], "{\"a\":2}");
  EXPECT_EQ(msgs[3], OrderedJson({{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "3"}}));
  EXPECT_EQ(msgs[4]["tool_call_id"], "call_2");
  // The call after an assistant message joins it.
  EXPECT_EQ(msgs[5]["content"], "3 and 4");
  EXPECT_EQ(msgs[5]["tool_calls"][0]["id"], "call_3");
  EXPECT_FALSE(chat_messages(std::nullopt, OrderedJson::array()).ok());
}

TEST(ResponsesItemsTest, OutputItemsAndText) {
  OrderedJson output = OrderedJson::array();
  output.push_back(reasoning_item("rs_1", "think"));
  output.push_back(message_output_item("msg_1", "Hello"));
  output.push_back(function_call_item("fc_1", "call_1", "add", "{}"));
  output.push_back(message_output_item("msg_2", " world"));
  EXPECT_EQ(output[1]["status"], "completed");
  EXPECT_EQ(output[1]["role"], "assistant");
  EXPECT_EQ(output[1]["content"][0]["type"], "output_text");
  EXPECT_TRUE(output[1]["content"][0]["annotations"].is_array());
  EXPECT_EQ(output[2]["call_id"], "call_1");
  EXPECT_EQ(output[0]["content"][0]["text"], "think");
  EXPECT_EQ(output_text(output), "Hello world");
}

}  // namespace
}  // namespace keel::server
