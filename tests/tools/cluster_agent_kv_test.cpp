// KV kept across tool calls through `keel cluster up` (docs/agent-kv.md, "In a cluster"): two
// colocated TEs behind one JE that routes round robin, so only sticky routing can send a program's
// next turn to the TE holding its pin. Two programs — chat calls with X-Program-Id, and a Responses
// chain by previous_response_id — each end turn 1 in a forced tool call; other traffic runs
// between the turns (two and three calls: under round robin alone one of the two next turns would
// land on the other TE); each next turn finds ≥ 90 % of its first turn's prompt in the cache.
// The gateway's /metrics shows the TEs' pins, the router's sticky decisions, and a turn that ended
// without a tool call releasing its pin across the wire. Bounded in time; stopped by PID.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

json post(int port, const std::string& path, const json& body,
          const std::map<std::string, std::string>& headers = {}) {
  const HttpResponse r = http_request(port, "POST", path, body.dump(), headers);
  EXPECT_EQ(r.status, 200) << path << ": " << r.body;
  return json::parse(r.body, nullptr, false);
}

json chat_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
      "required": ["city"]}}}])");
}

json response_tools() {
  return json::parse(R"([{"type": "function", "name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
      "required": ["city"]}}])");
}

// A system prompt of its own per program, so neither shares a prefix with the other.
std::string system_prompt(const std::string& who) {
  std::string s = who + ". ";
  for (int i = 0; i < 3; ++i) s += "You are a weather agent. ";  // stories260K: 512 positions
  return s;
}

// Other traffic between turns: `n` completions of distinct prompts.
void other_traffic(int port, int n, int* counter) {
  for (int i = 0; i < n; ++i) {
    const json r = post(port, "/v1/completions",
                        {{"prompt", "Story " + std::to_string((*counter)++) + ": Once upon a time"},
                         {"max_tokens", 2}});
    ASSERT_TRUE(r.is_object());
  }
}

struct Turns {
  int first_prompt = 0;
  int next_cached = -1;
};

// Chat calls of program `program` (X-Program-Id): a forced tool call, `between` other calls,
// then the tool's result.
Turns chat_program(int port, const std::string& program, int between, int* counter) {
  Turns t;
  const std::map<std::string, std::string> headers = {{"X-Program-Id", program}};
  const json messages = json::array({json{{"role", "system"}, {"content", system_prompt(program)}},
                                     json{{"role", "user"}, {"content", "Weather in Paris?"}}});
  const json r1 = post(port, "/v1/chat/completions",
                       {{"messages", messages},
                        {"tools", chat_tools()},
                        {"tool_choice", "required"},
                        {"max_tokens", 60},
                        {"temperature", 0}},
                       headers);
  EXPECT_EQ(r1["choices"][0]["finish_reason"], "tool_calls") << r1.dump();
  if (r1["choices"][0]["finish_reason"] != "tool_calls") return t;
  t.first_prompt = r1["usage"]["prompt_tokens"].get<int>();
  other_traffic(port, between, counter);
  const json call = r1["choices"][0]["message"]["tool_calls"];
  json history = messages;
  history.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", call}});
  history.push_back({{"role", "tool"}, {"tool_call_id", call[0]["id"]}, {"content", "Sunny"}});
  // Turn 2 offers the tool but stops at the first space or vowel: a text answer, whose pin the
  // gateway releases through the JE.
  const json r2 = post(port, "/v1/chat/completions",
                       {{"messages", history},
                        {"tools", chat_tools()},
                        {"max_tokens", 8},
                        {"temperature", 0},
                        {"stop", json::array({" ", "e", "a", "o"})}},
                       headers);
  if (r2.is_object() && r2.contains("usage")) {
    t.next_cached = r2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  }
  return t;
}

// A Responses chain (its program: the first response): a forced call, `between` other calls,
// then the call's output by previous_response_id.
Turns responses_program(int port, int between, int* counter) {
  Turns t;
  const std::string instructions = system_prompt("Chain two") + "Answer briefly.";
  const json r1 = post(port, "/v1/responses",
                       {{"instructions", instructions},
                        {"input", "Weather in Rome?"},
                        {"tools", response_tools()},
                        {"tool_choice", "required"},
                        {"max_output_tokens", 60},
                        {"temperature", 0}});
  const auto call = std::find_if(r1["output"].begin(), r1["output"].end(),
                                 [](const json& i) { return i["type"] == "function_call"; });
  EXPECT_NE(call, r1["output"].end()) << r1.dump();
  if (call == r1["output"].end()) return t;
  t.first_prompt = r1["usage"]["input_tokens"].get<int>();
  other_traffic(port, between, counter);
  const json r2 = post(port, "/v1/responses",
                       {{"previous_response_id", r1["id"]},
                        {"input", json::array({json{{"type", "function_call_output"},
                                                    {"call_id", (*call)["call_id"]},
                                                    {"output", "Sunny"}}})},
                        {"tools", response_tools()},
                        {"instructions", instructions},
                        {"max_output_tokens", 4},
                        {"temperature", 0}});
  if (r2.is_object() && r2.contains("usage")) {
    t.next_cached = r2["usage"]["input_tokens_details"]["cached_tokens"].get<int>();
  }
  return t;
}

TEST(ClusterAgentKv, TheNextTurnLandsOnTheTeHoldingItsPin) {
  KEEL_REQUIRE_SHARED();
  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY,
               "cluster",
               "up",
               "-m",
               shared_path("models/stories260K/stories260K.gguf"),
               "--served-model-name",
               "stories",
               "--colocated",
               "2",
               "--jes",
               "1",
               "--router",
               "round_robin",
               "--port",
               "0",
               "--threads-per-te",
               "1",
               "--kv-pin-ttl",
               "120"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<int> ready = proc::ready_port(child->ready);
  ASSERT_TRUE(ready.ok()) << ready.status().message();
  const int port = *ready;

  int counter = 0;
  const Turns chat = chat_program(port, "agent-1", /*between=*/2, &counter);
  const Turns chain = responses_program(port, /*between=*/3, &counter);
  ASSERT_GT(chat.first_prompt, 48);
  ASSERT_GT(chain.first_prompt, 48);
  EXPECT_GE(chat.next_cached, chat.first_prompt * 9 / 10)
      << "the chat program's next turn missed the TE holding its pin";
  EXPECT_GE(chain.next_cached, chain.first_prompt * 9 / 10)
      << "the Responses chain's next turn missed the TE holding its pin";

  // The TEs' pins (both first turns), the router's sticky decisions (both next turns) and the
  // chat's text answer releasing its pin (`unused`) through gateway → JE → TE. The TEs report
  // every interval; the gateway's view refreshes within its status cache.
  std::string metrics;
  const auto shows_all = [&] {
    metrics = http_request(port, "GET", "/metrics").body;
    return metric_value(metrics, "keel:kv_pins_total") >= 2 &&
           metric_value(metrics, "keel:kv_pins_released_total", "reason=\"unused\"") >= 1 &&
           metric_value(metrics, "keel:cluster_router_decisions_total", "branch=\"sticky\"") >= 2;
  };
  EXPECT_TRUE(eventually(shows_all, std::chrono::seconds(10))) << metrics;
}  // the supervisor stops the cluster by PID

}  // namespace
}  // namespace keel::testing
