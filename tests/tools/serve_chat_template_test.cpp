// `keel serve` with a chat template given at start, end to end over real HTTP on stories260K
// (whose GGUF has no template): --chat-template-file with Qwen2.5's real template serves chat
// through it (its default system prompt is in the prompt) and a forced tool call in its Hermes
// syntax; DeepSeek-R1-Distill's real template with --reasoning-parser deepseek-r1 puts the text
// into reasoning_content when chat_template_kwargs opens the thinking (and a forced tool call
// after it); a bad template, name or parser is a one-line error and a non-zero exit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }
std::string chat_template(const std::string& file) { return shared_path("chat-templates/" + file); }

json weather_tools() {
  return json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 8}},
      "required": ["city"]}}}])");
}

json post(int port, const json& body) {
  const HttpResponse r = http_request(port, "POST", "/v1/chat/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

TEST(ServeChatTemplateTest, QwenTemplateFileServesChatAndToolCalls) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", stories(), "-t", "1", "-c", "4096", "--chat-template-file",
                       chat_template("Qwen-Qwen2.5-7B-Instruct.jinja")});
  ASSERT_TRUE(server.ok()) << server.error();
  EXPECT_NE(server.log().find("chat template: file "), std::string::npos) << server.log();
  const json messages = json::array({json{{"role", "user"}, {"content", "Once upon a time"}}});
  // The prompt is the Qwen template's: its default system turn comes first.
  const HttpResponse tok =
      http_request(server.port(), "POST", "/tokenize", json{{"messages", messages}}.dump());
  ASSERT_EQ(tok.status, 200) << tok.body;
  const HttpResponse text = http_request(server.port(), "POST", "/detokenize",
                                         json{{"tokens", json::parse(tok.body)["tokens"]}}.dump());
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_NE(json::parse(text.body)["prompt"].get<std::string>().find(
                "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud."),
            std::string::npos)
      << text.body;
  const json chat =
      post(server.port(), {{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}});
  ASSERT_TRUE(chat.is_object());
  EXPECT_TRUE(chat["choices"][0]["message"]["content"].is_string());
  EXPECT_EQ(chat["usage"]["completion_tokens"], 8);
  EXPECT_FALSE(chat["choices"][0]["message"].contains("reasoning_content"));
  // A forced call in the template's Hermes syntax (the grammar writes <tool_call> blocks).
  const json call = post(server.port(), {{"messages", messages},
                                         {"tools", weather_tools()},
                                         {"tool_choice", "required"},
                                         {"max_tokens", 120},
                                         {"temperature", 0}});
  ASSERT_TRUE(call.is_object());
  const json& c = call["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << call.dump();
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << call.dump();
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  const json args = json::parse(
      c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(args.is_object()) << call.dump();
  EXPECT_TRUE(args["city"].is_string());
}

TEST(ServeChatTemplateTest, ReasoningFromATemplateThatOpensThink) {
  KEEL_REQUIRE_SHARED();
  ServeProcess server({"-m", stories(), "-t", "1", "-c", "4096", "--chat-template-file",
                       chat_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"),
                       "--reasoning-parser", "deepseek-r1"});
  ASSERT_TRUE(server.ok()) << server.error();
  const json messages = json::array({json{{"role", "user"}, {"content", "Tell a story"}}});
  // This template closes the thinking at once unless enable_thinking: all content.
  json body = {{"messages", messages}, {"max_tokens", 12}, {"temperature", 0}};
  const json closed = post(server.port(), body);
  EXPECT_FALSE(closed["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_FALSE(closed["choices"][0]["message"].contains("reasoning_content"));
  // enable_thinking opens <think> in the generation prompt: stories260K never closes it.
  body["chat_template_kwargs"] = {{"enable_thinking", true}};
  const json open = post(server.port(), body);
  const json& m = open["choices"][0]["message"];
  EXPECT_EQ(m["content"], "") << open.dump();
  ASSERT_TRUE(m["reasoning_content"].is_string()) << open.dump();
  EXPECT_FALSE(m["reasoning_content"].get<std::string>().empty());
  EXPECT_EQ(m["reasoning"], m["reasoning_content"]);
  EXPECT_EQ(open["usage"]["completion_tokens"], 12);
  // Streamed: the same thinking in delta.reasoning_content, no content.
  body["stream"] = true;
  const HttpResponse s = http_request(server.port(), "POST", "/v1/chat/completions", body.dump());
  ASSERT_EQ(s.status, 200) << s.body;
  std::string reasoning, content;
  for (const std::string& e : sse_events(s.body)) {
    if (e == "[DONE]") break;
    const json d = json::parse(e)["choices"][0]["delta"];
    reasoning += d.value("reasoning_content", "");
    content += d.value("content", "");
  }
  EXPECT_EQ(reasoning, m["reasoning_content"]);
  EXPECT_EQ(content, "");
  // A forced call after the thinking: the grammar makes the model close it first.
  body.erase("stream");
  body["tools"] = weather_tools();
  body["tool_choice"] = "required";
  body["max_tokens"] = 160;
  const json call = post(server.port(), body);
  const json& c = call["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls") << call.dump();
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << call.dump();
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_TRUE(c["message"]["reasoning_content"].is_string()) << call.dump();
}

TEST(ServeChatTemplateTest, BadTemplatesFailAtStartWithOneLine) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = make_temp_dir("bad_template");
  std::ofstream(dir + "/broken.jinja") << "{% for m in messages %}{{ m.content }";
  struct Bad {
    std::vector<std::string> flags;
    std::string message;
  };
  const Bad cases[] = {
      {{"--chat-template-file", dir + "/missing.jinja"}, "keel: --chat-template-file: "},
      {{"--chat-template-file", dir + "/broken.jinja"},
       "keel: --chat-template-file " + dir + "/broken.jinja: chat template: line 1"},
      {{"--chat-template", "nosuch"}, "keel: --chat-template nosuch: neither a built-in"},
      {{"--chat-template", "qwen3", "--chat-template-file", dir + "/broken.jinja"},
       "keel: --chat-template and --chat-template-file both given"},
  };
  for (const Bad& b : cases) {
    std::vector<std::string> args = {"serve", "-m", stories(), "--port", "0"};
    args.insert(args.end(), b.flags.begin(), b.flags.end());
    const CliResult r = run_keel(args);
    EXPECT_EQ(r.exit_code, 1) << b.message << "\n" << r.err;
    EXPECT_NE(r.err.find(b.message), std::string::npos) << r.err;
    // The error is the last line, and one line.
    const std::string last = r.err.substr(r.err.rfind("keel: "));
    EXPECT_EQ(count_lines(last), 1) << r.err;
  }
  const CliResult parser = run_keel({"serve", "-m", stories(), "--reasoning-parser", "r1"});
  EXPECT_NE(parser.exit_code, 0);
  EXPECT_NE(parser.err.find("--reasoning-parser"), std::string::npos) << parser.err;
}

}  // namespace
}  // namespace keel::testing
