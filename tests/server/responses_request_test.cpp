// parse_responses_request: string and item input, the chat body the generation fields mean
// (function tools, tool_choice, text.format, max_output_tokens, sampling), defaults, and the
// 400s — built-in tools named by type, bad tool_choice, background without store or with stream,
// metadata limits, unsupported fields, a missing input.
#include <gtest/gtest.h>

#include "server/responses_request.h"

namespace keel::server {
namespace {

ApiResult<ResponsesRequest> parse(std::string_view text) {
  int n = 0;
  const auto new_id = [&n](std::string_view prefix) {
    return std::string(prefix) + std::to_string(n++);
  };
  return parse_responses_request(Json::parse(text), OrderedJson::parse(text), new_id);
}

TEST(ResponsesRequestTest, StringInputAndDefaults) {
  ApiResult<ResponsesRequest> r = parse(R"({"model": "m", "input": "Hi"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ResponsesRequest& q = r.value();
  EXPECT_EQ(q.model, "m");
  ASSERT_EQ(q.input_items.size(), 1u);
  EXPECT_EQ(q.input_items[0]["id"], "msg_0");
  EXPECT_EQ(q.input_items[0]["role"], "user");
  EXPECT_EQ(q.input_items[0]["content"][0]["type"], "input_text");
  EXPECT_EQ(q.input_items[0]["content"][0]["text"], "Hi");
  EXPECT_TRUE(q.store);
  EXPECT_FALSE(q.stream);
  EXPECT_FALSE(q.background);
  EXPECT_EQ(q.tool_choice, "auto");
  EXPECT_EQ(q.text["format"]["type"], "text");
  EXPECT_EQ(q.chat_fields["model"], "m");
  EXPECT_FALSE(q.chat_fields.contains("tools"));
  EXPECT_FALSE(q.chat_fields.contains("response_format"));
}

TEST(ResponsesRequestTest, GenerationFieldsBecomeTheChatBody) {
  ApiResult<ResponsesRequest> r = parse(R"({
    "input": [{"role": "user", "content": "Add"}], "instructions": "Be brief.",
    "max_output_tokens": 32, "temperature": 0.5, "top_p": 0.9, "parallel_tool_calls": false,
    "tools": [{"type": "function", "name": "add", "description": "Adds",
               "parameters": {"type": "object", "properties": {"b": {}, "a": {}}},
               "strict": true}],
    "tool_choice": {"type": "function", "name": "add"},
    "metadata": {"k": "v"}, "store": false, "previous_response_id": "resp_1",
    "prompt_cache_key": "agent-3"})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const OrderedJson& c = r.value().chat_fields;
  EXPECT_EQ(c["max_completion_tokens"], 32);
  EXPECT_EQ(c["temperature"], 0.5);
  EXPECT_EQ(c["top_p"], 0.9);
  EXPECT_EQ(c["parallel_tool_calls"], false);
  EXPECT_EQ(c["tools"][0]["type"], "function");
  EXPECT_EQ(c["tools"][0]["function"]["name"], "add");
  EXPECT_EQ(c["tools"][0]["function"]["description"], "Adds");
  EXPECT_EQ(c["tools"][0]["function"]["strict"], true);
  // Key order as sent (schemas are generated in it).
  EXPECT_EQ(c["tools"][0]["function"]["parameters"]["properties"].begin().key(), "b");
  EXPECT_EQ(c["tool_choice"]["function"]["name"], "add");
  EXPECT_EQ(r.value().tools[0]["name"], "add");  // echoed in the Responses shape
  EXPECT_EQ(r.value().instructions, "Be brief.");
  EXPECT_EQ(r.value().metadata["k"], "v");
  EXPECT_FALSE(r.value().store);
  EXPECT_EQ(r.value().previous_response_id, "resp_1");
  EXPECT_EQ(r.value().prompt_cache_key, "agent-3");  // echoed, and checked by the chat path
  EXPECT_EQ(c["prompt_cache_key"], "agent-3");
}

TEST(ResponsesRequestTest, TextFormatBecomesResponseFormat) {
  ApiResult<ResponsesRequest> r = parse(R"({"input": "x", "text": {"format": {
    "type": "json_schema", "name": "p", "strict": true,
    "schema": {"type": "object", "properties": {"name": {"type": "string"}}}}}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const OrderedJson& f = r.value().chat_fields["response_format"];
  EXPECT_EQ(f["type"], "json_schema");
  EXPECT_EQ(f["json_schema"]["name"], "p");
  EXPECT_EQ(f["json_schema"]["schema"]["type"], "object");
  r = parse(R"({"input": "x", "text": {"format": {"type": "json_object"}}})");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().chat_fields["response_format"]["type"], "json_object");
  r = parse(R"({"input": "x", "text": {"format": {"type": "yaml"}}})");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().param, "text.format.type");
}

TEST(ResponsesRequestTest, BuiltinToolsAreRefusedByName) {
  for (const char* type : {"web_search", "web_search_preview", "file_search", "code_interpreter",
                           "computer_use_preview", "image_generation", "mcp", "local_shell"}) {
    EXPECT_TRUE(is_builtin_tool_type(type)) << type;
    const std::string body =
        std::string(R"({"input": "x", "tools": [{"type": "function", "name": "f"}, {"type": ")") +
        type + R"("}]})";
    ApiResult<ResponsesRequest> r = parse(body);
    ASSERT_FALSE(r.ok()) << type;
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().code, "unsupported_tool");
    EXPECT_EQ(r.error().param, "tools[1].type");
    EXPECT_NE(r.error().message.find(type), std::string::npos) << r.error().message;
  }
  ApiResult<ResponsesRequest> r = parse(R"({"input": "x", "tools": [{"type": "bogus"}]})");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("bogus"), std::string::npos);
}

TEST(ResponsesRequestTest, BadRequestsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({})", "input"},
      {R"({"input": 5})", "input"},
      {R"({"input": []})", "input"},
      {R"({"input": "x", "tool_choice": "sometimes"})", "tool_choice"},
      {R"({"input": "x", "tool_choice": {"type": "file_search"}})", "tool_choice"},
      {R"({"input": "x", "background": true, "store": false})", "background"},
      {R"({"input": "x", "background": true, "stream": true})", "stream"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens"},
      {R"({"input": "x", "temperature": 3})", "temperature"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata"},
      {R"({"input": "x", "previous_response_id": ""})", "previous_response_id"},
      {R"({"input": "x", "include": ["file_search_call.results"]})", "include"},
      {R"({"input": "x", "truncation": "auto"})", "truncation"},
      {R"({"input": "x", "tools": {}})", "tools"},
      {R"({"input": "x", "prompt_cache_key": 5})", "prompt_cache_key"},
  };
  for (const auto& [body, param] : cases) {
    ApiResult<ResponsesRequest> r = parse(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.error().status, 400) << body;
    EXPECT_EQ(r.error().param, param) << body << ": " << r.error().message;
  }
  std::string many = R"({"input": "x", "metadata": {)";
  for (int i = 0; i < 17; ++i) many += (i ? "," : "") + ("\"k" + std::to_string(i) + "\": \"v\"");
  EXPECT_FALSE(parse(many + "}}").ok());
}

}  // namespace
}  // namespace keel::server
