// Tool calling over real HTTP against the fake engine, with the harness's ChatML formatter (a
// template that does not render tools: keel's generic convention). The scripted output stands in
// for what the forced grammar makes the model write; the tests check what the engine is asked for
// (the grammar, the tools in the system prompt) and the response shapes: message.tool_calls and
// finish_reason "tool_calls", and OpenAI's streamed tool-call deltas.
#include <gtest/gtest.h>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

const char* kCallText = R"({"name": "add", "arguments": {"a": 1, "b": 2}})";

std::vector<int32_t> bytes_of(std::string_view text) {
  std::vector<int32_t> out;
  for (char c : text) out.push_back(byte_token(static_cast<uint8_t>(c)));
  return out;
}

// A stream's tool calls, accumulated from its deltas as the SDKs do: [{id, name, arguments,
// fragments}]; checks that a call's first delta carries id, type, name and arguments "".
std::vector<Json> streamed_calls(const std::vector<Json>& events) {
  std::vector<Json> calls;
  for (const Json& e : events) {
    if (e["choices"].empty() || !e["choices"][0]["delta"].contains("tool_calls")) continue;
    for (const Json& d : e["choices"][0]["delta"]["tool_calls"]) {
      const size_t i = d["index"].get<size_t>();
      if (i == calls.size()) {
        EXPECT_TRUE(d.contains("id")) << d;
        EXPECT_EQ(d["type"], "function");
        EXPECT_EQ(d["function"]["arguments"], "");
        calls.push_back({{"id", d["id"]},
                         {"name", d["function"]["name"]},
                         {"arguments", ""},
                         {"fragments", 0}});
        continue;
      }
      EXPECT_LT(i, calls.size()) << d;
      if (i >= calls.size()) continue;
      EXPECT_FALSE(d.contains("id")) << d;
      calls[i]["arguments"] =
          calls[i]["arguments"].get<std::string>() + d["function"]["arguments"].get<std::string>();
      calls[i]["fragments"] = calls[i]["fragments"].get<int>() + 1;
    }
  }
  return calls;
}

Json tools_body(Json choice, bool stream) {
  Json j = {{"model", "test-model"},
            {"messages", Json::array({Json{{"role", "user"}, {"content", "1+2?"}}})},
            {"tools", Json::parse(R"([{"type": "function", "function": {"name": "add",
              "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
              "b": {"type": "integer"}}, "required": ["a", "b"]}}}])")}};
  if (!choice.is_null()) j["tool_choice"] = std::move(choice);
  if (stream) j["stream"] = true;
  return j;
}

class ToolsHttpTest : public ::testing::Test {
 protected:
  void script(std::string_view text) {
    FakeScript s;
    s.tokens = bytes_of(text);
    s.tokens.push_back(kEos);
    h_.engine().set_script([s](const engine::GenerationRequest&) { return s; });
  }
  std::vector<Json> events(const HttpResult& r) {
    std::vector<Json> out;
    const std::vector<std::string> data = r.sse_data();
    EXPECT_FALSE(data.empty());
    if (data.empty()) return out;
    EXPECT_EQ(data.back(), "[DONE]");
    for (size_t i = 0; i + 1 < data.size(); ++i) out.push_back(Json::parse(data[i]));
    return out;
  }
  std::string prompt_text(const engine::GenerationRequest& r) {
    return h_.tokenizer().decode(r.prompt_tokens, /*render_special=*/true);
  }
  ServerHarness h_{test_config(), /*max_model_len=*/4096};
};

TEST_F(ToolsHttpTest, ForcedCallNonStreamed) {
  script(kCallText);
  const Json named = {{"type", "function"}, {"function", {{"name", "add"}}}};
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body(named, false));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json c = r.json()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_TRUE(c["message"]["content"].is_null());
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const Json call = c["message"]["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "add");
  EXPECT_EQ(call["function"]["arguments"], R"({"a":1,"b":2})");
  // The engine was asked for the forced call's grammar, with the tools in the system prompt.
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_NE(reqs[0].grammar.find(R"({\"name\": \"add\", \"arguments\": )"), std::string::npos)
      << reqs[0].grammar;
  EXPECT_NE(prompt_text(reqs[0]).find("You can call these functions"), std::string::npos);
}

TEST_F(ToolsHttpTest, ForcedCallStreamedAsOpenAiDeltas) {
  script(kCallText);
  Json body = tools_body("required", true);
  body["stream_options"] = {{"include_usage", true}};
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<Json> ev = events(r);
  ASSERT_GE(ev.size(), 6u) << r.body;  // role, call start, argument fragments, finish, usage
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  const Json start = ev[1]["choices"][0]["delta"];
  EXPECT_FALSE(start.contains("content"));
  ASSERT_EQ(start["tool_calls"].size(), 1u);
  EXPECT_EQ(start["tool_calls"][0]["index"], 0);
  EXPECT_EQ(start["tool_calls"][0]["id"].get<std::string>().substr(0, 5), "call_");
  EXPECT_EQ(start["tool_calls"][0]["type"], "function");
  EXPECT_EQ(start["tool_calls"][0]["function"]["name"], "add");
  EXPECT_EQ(start["tool_calls"][0]["function"]["arguments"], "");
  // The arguments arrive as the model writes them (here a byte per token): many fragments.
  const Json args = ev[2]["choices"][0]["delta"]["tool_calls"][0];
  EXPECT_EQ(args, Json({{"index", 0}, {"function", {{"arguments", "{"}}}}));
  const std::vector<Json> calls = streamed_calls(ev);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["arguments"], R"({"a":1,"b":2})");
  EXPECT_GT(calls[0]["fragments"].get<int>(), 5);
  const size_t n = ev.size();
  EXPECT_EQ(ev[n - 2]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_TRUE(ev[n - 2]["choices"][0]["delta"].empty());
  EXPECT_TRUE(ev[n - 1]["choices"].empty());
  // "required" is forced too: the engine got a grammar.
  ASSERT_EQ(h_.engine().submitted().size(), 1u);
  EXPECT_FALSE(h_.engine().submitted()[0].grammar.empty());
}

TEST_F(ToolsHttpTest, AutoWithPlainTextIsContent) {
  script("No call needed.");
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body(nullptr, false));
  ASSERT_EQ(r.status, 200) << r.body;
  const Json c = r.json()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_EQ(c["message"]["content"], "No call needed.");
  EXPECT_FALSE(c["message"].contains("tool_calls"));
  // auto: free text or a well-formed call (tool_grammar.h)
  EXPECT_NE(h_.engine().submitted()[0].grammar.find("free ::="), std::string::npos);

  HttpResult s = post_json(h_.port(), "/v1/chat/completions", tools_body("auto", true));
  ASSERT_EQ(s.status, 200) << s.body;
  std::string content;
  for (const Json& e : events(s)) {
    const Json& d = e["choices"][0]["delta"];
    EXPECT_FALSE(d.contains("tool_calls"));
    if (d.contains("content")) content += d["content"].get<std::string>();
  }
  EXPECT_EQ(content, "No call needed.");
}

TEST_F(ToolsHttpTest, AutoCallIsParsedAndNoneKeepsToolsOut) {
  script(kCallText);
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body(nullptr, true));
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<Json> ev = events(r);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back()["choices"][0]["finish_reason"], "tool_calls");
  const std::vector<Json> calls = streamed_calls(ev);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["name"], "add");
  EXPECT_EQ(calls[0]["arguments"], R"({"a":1,"b":2})");
  // Not streamed: the same arguments.
  HttpResult whole = post_json(h_.port(), "/v1/chat/completions", tools_body(nullptr, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(whole.json()["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            calls[0]["arguments"]);

  HttpResult none = post_json(h_.port(), "/v1/chat/completions", tools_body("none", false));
  ASSERT_EQ(none.status, 200) << none.body;
  EXPECT_EQ(none.json()["choices"][0]["message"]["content"], kCallText);  // text, not a call
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_TRUE(reqs[2].grammar.empty());  // none: no tool grammar
  EXPECT_EQ(prompt_text(reqs[2]).find("You can call these functions"), std::string::npos);
}

bool grammar_accepts(const std::string& gbnf, std::string_view text) {
  Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << gbnf;
  if (!g.ok()) return false;
  grammar::StackSet s = grammar::initial_state(*g);
  return grammar::advance(*g, text, &s) && s.has_complete();
}

// JSON Schemas keep the key order of the request's text (server/schema_order.h): properties are
// generated in the declared order, and the chat template sees the tool as sent.
TEST_F(ToolsHttpTest, SchemasKeepTheOrderSent) {
  script(R"({"name": "add", "arguments": {"b": 2, "a": 1}})");
  const std::string body = R"({"model": "test-model", "messages": [{"role": "user",
      "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "r",
      "schema": {"type": "object", "properties": {"zeta": {"type": "integer"},
      "alpha": {"type": "string"}}, "required": ["zeta", "alpha"]}}}})";
  HttpResult r = http_request(h_.port(), "POST", "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string tools = R"({"model": "test-model", "messages": [{"role": "user",
      "content": "hi"}], "tool_choice": "required", "tools": [{"type": "function", "function":
      {"name": "add", "parameters": {"type": "object", "properties": {"b": {"type": "integer"},
      "a": {"type": "integer"}}, "required": ["b", "a"]}}}]})";
  r = http_request(h_.port(), "POST", "/v1/chat/completions", tools);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_TRUE(grammar_accepts(reqs[0].grammar, R"({"zeta": 1, "alpha": "x"})"));
  EXPECT_FALSE(grammar_accepts(reqs[0].grammar, R"({"alpha": "x", "zeta": 1})"));
  EXPECT_TRUE(
      grammar_accepts(reqs[1].grammar, R"({"name": "add", "arguments": {"b": 2, "a": 1}})"));
  EXPECT_FALSE(
      grammar_accepts(reqs[1].grammar, R"({"name": "add", "arguments": {"a": 1, "b": 2}})"));
  const std::string prompt = prompt_text(reqs[1]);
  EXPECT_LT(prompt.find("\"b\""), prompt.find("\"a\"")) << prompt;
}

// KV kept across tool calls: chat with tools asks the engine to keep the KV (keep_kv); a choice
// that did not end in a call releases its pin at once (streamed or not); tool_choice "none" keeps
// nothing.
TEST_F(ToolsHttpTest, KvIsKeptForACallAndReleasedOtherwise) {
  script(kCallText);
  for (const bool stream : {false, true}) {
    HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body("required", stream));
    ASSERT_EQ(r.status, 200) << r.body;
  }
  script("Three.");
  for (const bool stream : {false, true}) {
    HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body("auto", stream));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find(R"("finish_reason":"stop")"), std::string::npos) << r.body;
  }
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", tools_body("none", false));
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 5u);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(reqs[i].keep_kv, i < 4) << i;
  const std::vector<engine::RequestKey> keys = h_.engine().keys();
  ASSERT_EQ(keys.size(), 5u);
  EXPECT_EQ(h_.engine().kv_pin_releases(), (std::vector<engine::RequestKey>{keys[2], keys[3]}));
}

// KV kept across tool calls in a cluster routes by program: a call's prompt_cache_key names its
// program when no X-Program-Id does (the header wins), so its turns are sticky (agent-kv.md).
TEST_F(ToolsHttpTest, PromptCacheKeyNamesTheProgramUnlessTheHeaderDoes) {
  script(kCallText);
  Json body = tools_body("required", false);
  body["prompt_cache_key"] = "session-7";
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", body).status, 200);
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", body, {"X-Program-Id: agent-1"}).status,
            200);
  ASSERT_EQ(post_json(h_.port(), "/v1/chat/completions", tools_body("required", false)).status,
            200);
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].program, "session-7");
  EXPECT_EQ(reqs[1].program, "agent-1");
  EXPECT_EQ(reqs[2].program, "");
}

TEST_F(ToolsHttpTest, BadToolsAre400s) {
  Json bad = tools_body(nullptr, false);
  bad["tools"][0]["function"]["parameters"]["properties"]["a"]["not"] = Json::object();
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", bad);
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "tools[0].function.parameters");
  EXPECT_NE(r.json()["error"]["message"].get<std::string>().find("`not`"), std::string::npos);
  const Json unknown = {{"type", "function"}, {"function", {{"name", "mul"}}}};
  r = post_json(h_.port(), "/v1/chat/completions", tools_body(unknown, false));
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "tool_choice");
  EXPECT_TRUE(h_.engine().submitted().empty());
}

}  // namespace
}  // namespace keel::server::testing
