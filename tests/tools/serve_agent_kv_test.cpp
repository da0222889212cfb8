// End to end: KV kept across tool calls on `keel serve` (docs/agent-kv.md) with the built-in
// stories260K and a 64-block KV pool. Turn 1 ends in a forced tool call; other traffic then
// computes more than twice the pool; turn 2 (the history, the call and its result) is served from
// the cache for ≥ 95 % of turn 1's prompt — by a plain chat resend and by a Responses chain
// (previous_response_id + function_call_output) — and /metrics shows the pins. With
// --kv-pin-ttl 0 the same sequence finds (next to) nothing. And a template that rewrites an
// earlier turn (Qwen3 drops the thinking of turns before the last user message) still reuses the
// longest common prefix: every block before the first that differs.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

constexpr int kPoolBlocks = 64;
constexpr int kBlockTokens = 16;
// stories260K's KV: 5 layers × (K + V) × 32 values × 4 bytes per token.
constexpr int kPoolBytes = kPoolBlocks * kBlockTokens * 5 * 2 * 32 * 4;

json post(int port, const std::string& path, const json& body) {
  const HttpResponse r = http_request(port, "POST", path, body.dump());
  EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  return json::parse(r.body, nullptr, false);
}

json chat_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
      "required": ["city"]}}}])");
}

std::string system_prompt() {
  std::string s;
  for (int i = 0; i < 12; ++i) s += "You are a weather agent. ";
  return s;
}

// Other traffic: completions of distinct stories that together compute more than twice the pool.
void fill_pool_twice(int port) {
  int64_t computed = 0;
  for (int i = 0; computed < 2 * kPoolBlocks * kBlockTokens && i < 40; ++i) {
    std::string story = "Story number " + std::to_string(i) + ": ";
    for (int k = 0; k < 24; ++k) story += "Once upon a time there was a little girl named Lily. ";
    const json r = post(port, "/v1/completions",
                        {{"prompt", story.substr(static_cast<size_t>(i))}, {"max_tokens", 1}});
    ASSERT_TRUE(r.is_object());
    computed += r["usage"]["prompt_tokens"].get<int64_t>() -
                r["usage"]["prompt_tokens_details"]["cached_tokens"].get<int64_t>();
  }
  ASSERT_GE(computed, 2 * kPoolBlocks * kBlockTokens);
}

struct ChatTurns {
  int turn1_prompt = 0;
  double pins = -1;  // keel:kv_pins and keel:kv_pinned_blocks after turn 1
  double pinned_blocks = -1;
  int turn2_cached = 0;
};

// Turn 1 with a forced call, the traffic, then turn 2 with the call's result. With `pinned`, waits
// for the pin to show in /metrics (stats are published just after the final event).
ChatTurns run_chat_turns(int port, bool pinned) {
  ChatTurns t;
  const json messages = json::array({json{{"role", "system"}, {"content", system_prompt()}},
                                     json{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const json r1 = post(port, "/v1/chat/completions",
                       {{"messages", messages},
                        {"tools", chat_tools()},
                        {"tool_choice", "required"},
                        {"max_tokens", 60},
                        {"temperature", 0}});
  EXPECT_EQ(r1["choices"][0]["finish_reason"], "tool_calls") << r1.dump();
  if (r1["choices"][0]["finish_reason"] != "tool_calls") return t;
  t.turn1_prompt = r1["usage"]["prompt_tokens"].get<int>();
  const auto read_pins = [&] {
    const std::string metrics = http_request(port, "GET", "/metrics").body;
    t.pins = metric_value(metrics, "keel:kv_pins");
    t.pinned_blocks = metric_value(metrics, "keel:kv_pinned_blocks");
    return t.pins > 0;
  };
  if (pinned) {
    EXPECT_TRUE(eventually(read_pins, std::chrono::seconds(5)));
  } else {
    read_pins();
  }
  fill_pool_twice(port);
  const json call = r1["choices"][0]["message"]["tool_calls"];
  json history = messages;
  history.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", call}});
  history.push_back({{"role", "tool"}, {"tool_call_id", call[0]["id"]}, {"content", "Sunny"}});
  const json r2 = post(port, "/v1/chat/completions",
                       {{"messages", history},
                        {"tools", chat_tools()},
                        {"max_tokens", 4},
                        {"temperature", 0},
                        {"prompt_cache_key", "agent-1"}});
  t.turn2_cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  return t;
}

struct ResponsesTurns {
  int turn1_input = 0;
  int turn2_cached = 0;
};

ResponsesTurns run_responses_turns(int port) {
  ResponsesTurns t;
  const json tools = json::parse(R"([{"type": "function", "name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
      "required": ["city"]}}])");
  const json r1 = post(port, "/v1/responses",
                       {{"instructions", system_prompt() + "Answer briefly."},
                        {"input", "Weather in Rome?"},
                        {"tools", tools},
                        {"tool_choice", "required"},
                        {"max_output_tokens", 60},
                        {"temperature", 0}});
  const auto call = std::find_if(r1["output"].begin(), r1["output"].end(),
                                 [](const json& i) { return i["type"] == "function_call"; });
  EXPECT_NE(call, r1["output"].end()) << r1.dump();
  if (call == r1["output"].end()) return t;
  t.turn1_input = r1["usage"]["input_tokens"].get<int>();
  fill_pool_twice(port);
  const json r2 = post(port, "/v1/responses",
                       {{"previous_response_id", r1["id"]},
                        {"input", json::array({json{{"type", "function_call_output"},
                                                    {"call_id", (*call)["call_id"]},
                                                    {"output", "Sunny"}}})},
                        {"tools", tools},
                        {"instructions", system_prompt() + "Answer briefly."},
                        {"max_output_tokens", 4},
                        {"temperature", 0}});
  t.turn2_cached = r2["usage"]["input_tokens_details"]["cached_tokens"].get<int>();
  return t;
}

std::vector<std::string> serve_args(const std::string& ttl) {
  return {"-t",
          "1",
          "-c",
          "2048",
          "--kv-cache-bytes",
          std::to_string(kPoolBytes),
          "--kv-pin-ttl",
          ttl,
          "--kv-pin-max-fraction",
          "0.5"};
}

TEST(ServeAgentKvTest, ATurnEndingInAToolCallKeepsItsKvThroughOtherTraffic) {
  ServeProcess server(serve_args("60"));
  ASSERT_TRUE(server.ok()) << server.error();
  const ChatTurns chat = run_chat_turns(server.port(), true);
  ASSERT_GT(chat.turn1_prompt, 300);
  EXPECT_EQ(chat.pins, 1);
  // The prompt's whole blocks and some of the output's, within the cap (half the pool).
  EXPECT_GE(chat.pinned_blocks, chat.turn1_prompt / kBlockTokens);
  EXPECT_LE(chat.pinned_blocks, kPoolBlocks / 2);
  EXPECT_GE(chat.turn2_cached, 0.95 * chat.turn1_prompt)
      << chat.turn2_cached << " of " << chat.turn1_prompt;
  const ResponsesTurns resp = run_responses_turns(server.port());
  ASSERT_GT(resp.turn1_input, 300);
  EXPECT_GE(resp.turn2_cached, 0.95 * resp.turn1_input)
      << resp.turn2_cached << " of " << resp.turn1_input;
  // Four calls may have pinned (each turn 2 too, when `auto` stopped: then released unused).
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_GE(metric_value(metrics, "keel:kv_pins_total"), 2);
  EXPECT_LE(metric_value(metrics, "keel:kv_pinned_blocks"), kPoolBlocks / 2);
}

TEST(ServeAgentKvTest, WithoutPinsTheSameTurnIsRecomputed) {
  ServeProcess server(serve_args("0"));
  ASSERT_TRUE(server.ok()) << server.error();
  const ChatTurns chat = run_chat_turns(server.port(), false);
  ASSERT_GT(chat.turn1_prompt, 300);
  EXPECT_EQ(chat.pins, 0);
  EXPECT_LE(chat.turn2_cached, 0.25 * chat.turn1_prompt)
      << chat.turn2_cached << " of " << chat.turn1_prompt;
}

// The Qwen3 template drops an assistant turn's thinking once a later user message follows: the
// next prompt differs from the cached one from that turn on. The cache serves every whole block of
// the common prefix (as /tokenize renders both), and no more.
TEST(ServeAgentKvTest, ARewrittenHistoryReusesTheLongestCommonPrefix) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", shared_path("models/stories260K/stories260K.gguf"), "-t", "1", "-c",
                       "4096", "--chat-template-file",
                       shared_path("chat-templates/Qwen-Qwen3-0.6B.jinja")});
  ASSERT_TRUE(server.ok()) << server.error();
  const int port = server.port();
  const json call = {{"id", "call_1"},
                     {"type", "function"},
                     {"function", {{"name", "get_weather"}, {"arguments", R"({"city":"Paris"})"}}}};
  json turn1 = json::array(
      {json{{"role", "system"}, {"content", system_prompt()}},
       json{{"role", "user"}, {"content", "Weather in Paris?"}},
       json{{"role", "assistant"},
            {"content", ""},
            {"reasoning_content", "The user wants the weather in Paris; I call the tool."},
            {"tool_calls", json::array({call})}},
       json{{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "Sunny"}}});
  json turn2 = turn1;
  turn2.push_back({{"role", "assistant"}, {"content", "It is sunny in Paris."}});
  turn2.push_back({{"role", "user"}, {"content", "And in Rome?"}});
  const auto tokens = [&](const json& messages) {
    return post(port, "/tokenize", {{"messages", messages}})["tokens"].get<std::vector<int>>();
  };
  const std::vector<int> a = tokens(turn1), b = tokens(turn2);
  const auto diverge = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  const int common = static_cast<int>(diverge.first - a.begin());
  ASSERT_LT(common, static_cast<int>(a.size()));  // the thinking was dropped: a real rewrite
  ASSERT_GT(common, 4 * kBlockTokens);
  post(port, "/v1/chat/completions", {{"messages", turn1}, {"max_tokens", 1}});
  const json r = post(port, "/v1/chat/completions", {{"messages", turn2}, {"max_tokens", 1}});
  EXPECT_EQ(r["usage"]["prompt_tokens"], static_cast<int>(b.size()));
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"],
            common / kBlockTokens * kBlockTokens)
      << common << " tokens in common";
}

}  // namespace
}  // namespace keel::testing
