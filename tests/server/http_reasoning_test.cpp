// The reasoning parser and chat_template_kwargs over real HTTP against the fake engine, with a
// test chat template that renders past reasoning and opens <think> in the generation prompt when
// the request's chat_template_kwargs say open_think. The scripted outputs are byte tokens, so
// every tag arrives split across tokens: message.reasoning_content / reasoning and
// delta.reasoning_content / reasoning carry the thinking, content the answer, tool calls come from
// the content only, and stop strings and usage are as without the parser.
#include <gtest/gtest.h>

#include "server/chat_formatter.h"
#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kTemplate = R"({%- for m in messages -%}
{{- '<|im_start|>' ~ m.role ~ '\n' -}}
{%- if m.reasoning_content -%}{{- '<think>' ~ m.reasoning_content ~ '</think>' -}}{%- endif -%}
{{- m.content ~ '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- if open_think is defined and open_think -%}{{- '<think>\n' -}}{%- endif -%}
{%- endif -%})";

const char* kReasoningCallText = R"({"name": "add", "arguments": {"a": 1, "b": 2}})";

std::vector<int32_t> reasoning_bytes_of(std::string_view text) {
  std::vector<int32_t> out;
  for (char c : text) out.push_back(byte_token(static_cast<uint8_t>(c)));
  return out;
}

Json reasoning_chat_body(bool stream = false) {
  Json j = {{"model", "test-model"},
            {"messages", Json::array({Json{{"role", "user"}, {"content", "Hi"}}})}};
  if (stream) j["stream"] = true;
  return j;
}

Json with_tools(Json body) {
  body["tools"] = Json::parse(R"([{"type": "function", "function": {"name": "add",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}}, "required": ["a", "b"]}}}])");
  return body;
}

// A stream's accumulated fields: reasoning_content, reasoning, content, the calls' names and
// arguments, the finish reason; and whether any delta carried reasoning without an equal
// `reasoning`, or an empty content next to reasoning.
struct Streamed {
  std::string reasoning_content, reasoning, content, call_names, call_arguments, finish;
  bool mismatch = false;
  size_t reasoning_chunks = 0;
};

Streamed accumulate(const HttpResult& r) {
  Streamed s;
  const std::vector<std::string> data = r.sse_data();
  EXPECT_FALSE(data.empty());
  if (data.empty()) return s;
  EXPECT_EQ(data.back(), "[DONE]");
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    const Json e = Json::parse(data[i]);
    if (e["choices"].empty()) continue;
    const Json& c = e["choices"][0];
    const Json& d = c["delta"];
    if (d.contains("reasoning_content")) {
      ++s.reasoning_chunks;
      s.reasoning_content += d["reasoning_content"].get<std::string>();
      s.mismatch = s.mismatch || d.value("reasoning", "") != d["reasoning_content"] ||
                   (d.contains("content") && d["content"] == "");
    }
    if (d.contains("reasoning")) s.reasoning += d["reasoning"].get<std::string>();
    if (d.contains("content")) s.content += d["content"].get<std::string>();
    if (d.contains("tool_calls")) {
      for (const Json& t : d["tool_calls"]) {
        if (t["function"].contains("name")) s.call_names += t["function"]["name"];
        s.call_arguments += t["function"]["arguments"].get<std::string>();
      }
    }
    if (!c["finish_reason"].is_null()) s.finish = c["finish_reason"];
  }
  return s;
}

class ReasoningHttpTest : public ::testing::Test {
 protected:
  explicit ReasoningHttpTest(ReasoningParser parser = ReasoningParser::kQwen3)
      : h_(test_config(), /*max_model_len=*/4096, nullptr, [parser](ServerDeps* d) {
          auto t = tokenizer::ChatTemplate::parse(kTemplate);
          EXPECT_TRUE(t.ok()) << t.status().to_string();
          d->chat = template_chat_formatter(
              std::make_shared<const tokenizer::ChatTemplate>(std::move(t).value()), d->tokenizer);
          d->reasoning_parser = parser;
        }) {}
  void script(std::string_view text, bool eos = true) {
    FakeScript s;
    s.tokens = reasoning_bytes_of(text);
    if (eos) s.tokens.push_back(kEos);
    h_.engine().set_script([s](const engine::GenerationRequest&) { return s; });
  }
  Json message(const Json& body) {
    HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.status == 200 ? r.json()["choices"][0] : Json();
  }
  std::string last_prompt() {
    const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
    return reqs.empty() ? std::string()
                        : h_.tokenizer().decode(reqs.back().prompt_tokens, /*render_special=*/true);
  }
  ServerHarness h_;
};

TEST_F(ReasoningHttpTest, ThinkingSplitFromTheAnswer) {
  script("<think>\nI should greet.\n</think>\n\nHello!");
  const Json c = message(reasoning_chat_body());
  EXPECT_EQ(c["message"]["reasoning_content"], "I should greet.");
  EXPECT_EQ(c["message"]["reasoning"], "I should greet.");
  EXPECT_EQ(c["message"]["content"], "Hello!");
  EXPECT_EQ(c["finish_reason"], "stop");
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", reasoning_chat_body(/*stream=*/true));
  ASSERT_EQ(r.status, 200) << r.body;
  const Streamed s = accumulate(r);
  EXPECT_EQ(s.reasoning_content, "I should greet.");
  EXPECT_EQ(s.reasoning, "I should greet.");
  EXPECT_EQ(s.content, "Hello!");
  EXPECT_FALSE(s.mismatch) << r.body;
  EXPECT_GT(s.reasoning_chunks, 3u);  // streamed as generated, not at the end
  EXPECT_EQ(s.finish, "stop");
}

TEST_F(ReasoningHttpTest, AnOutputWithoutThinkingIsContentUnchanged) {
  script("  Plain <think> text");
  const Json c = message(reasoning_chat_body());
  EXPECT_EQ(c["message"]["content"], "  Plain <think> text");
  EXPECT_FALSE(c["message"].contains("reasoning_content"));
  EXPECT_FALSE(c["message"].contains("reasoning"));
  const Streamed s =
      accumulate(post_json(h_.port(), "/v1/chat/completions", reasoning_chat_body(true)));
  EXPECT_EQ(s.content, "  Plain <think> text");
  EXPECT_EQ(s.reasoning_chunks, 0u);
}

TEST_F(ReasoningHttpTest, TemplateKwargsOpenTheThinkingInThePrompt) {
  Json body = reasoning_chat_body();
  body["chat_template_kwargs"] = {{"open_think", true}};
  script("Let me see.\n</think>\nAnswer.");
  const Json c = message(body);
  EXPECT_TRUE(last_prompt().ends_with("<|im_start|>assistant\n<think>\n")) << last_prompt();
  EXPECT_EQ(c["message"]["reasoning_content"], "Let me see.");
  EXPECT_EQ(c["message"]["content"], "Answer.");
  // A thinking the model never closes is all reasoning (EOS here; max_tokens alike).
  script("Still thinking");
  const Json open = message(body);
  EXPECT_EQ(open["message"]["reasoning_content"], "Still thinking");
  EXPECT_EQ(open["message"]["content"], "");
  body["stream"] = true;
  const Streamed s = accumulate(post_json(h_.port(), "/v1/chat/completions", body));
  EXPECT_EQ(s.reasoning_content, "Still thinking");
  EXPECT_EQ(s.content, "");
  // Without the kwarg the prompt does not open it, and Qwen3's parser reads content first.
  script("Still thinking");
  EXPECT_EQ(message(reasoning_chat_body())["message"]["content"], "Still thinking");
  EXPECT_TRUE(last_prompt().ends_with("<|im_start|>assistant\n")) << last_prompt();
}

TEST_F(ReasoningHttpTest, BadTemplateKwargsAre400) {
  Json body = reasoning_chat_body();
  body["chat_template_kwargs"] = Json::array({1});
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "chat_template_kwargs");
  body["chat_template_kwargs"] = {{"add_generation_prompt", false}};
  r = post_json(h_.port(), "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "chat_template_kwargs.add_generation_prompt");
  EXPECT_TRUE(h_.engine().submitted().empty());
}

TEST_F(ReasoningHttpTest, HistoryReasoningReachesTheTemplateUnderEitherName) {
  for (const char* name : {"reasoning_content", "reasoning"}) {
    script("ok");
    Json body = reasoning_chat_body();
    body["messages"] = Json::parse(R"([{"role": "user", "content": "Q1"},
        {"role": "assistant", "content": "A1"}, {"role": "user", "content": "Q2"}])");
    body["messages"][1][name] = "earlier thought";
    message(body);
    EXPECT_NE(last_prompt().find("assistant\n<think>earlier thought</think>A1<|im_end|>"),
              std::string::npos)
        << name << ": " << last_prompt();
  }
  Json bad = reasoning_chat_body();
  bad["messages"] = Json::parse(R"([{"role": "assistant", "content": "A", "reasoning": 5}])");
  HttpResult r = post_json(h_.port(), "/v1/chat/completions", bad);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json()["error"]["param"], "messages[0].reasoning");
}

TEST_F(ReasoningHttpTest, ToolCallsComeFromTheContentOnly) {
  // The thinking mentions a call-shaped object; only the one after </think> is a call.
  const std::string text =
      std::string("<think>Maybe {\"name\": \"x\"}?</think>\n") + kReasoningCallText;
  script(text);
  const Json c = message(with_tools(reasoning_chat_body()));
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["reasoning_content"], R"(Maybe {"name": "x"}?)");
  EXPECT_TRUE(c["message"]["content"].is_null());
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["arguments"], R"({"a":1,"b":2})");
  // The engine's tool grammar lets the thinking come first.
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 1u);
  EXPECT_TRUE(reqs[0].grammar.starts_with("root ::= think? (")) << reqs[0].grammar;
  HttpResult r =
      post_json(h_.port(), "/v1/chat/completions", with_tools(reasoning_chat_body(true)));
  ASSERT_EQ(r.status, 200) << r.body;
  const Streamed s = accumulate(r);
  EXPECT_EQ(s.reasoning_content, R"(Maybe {"name": "x"}?)");
  EXPECT_EQ(s.content, "");
  EXPECT_EQ(s.call_names, "add");
  EXPECT_EQ(s.call_arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(s.finish, "tool_calls");
}

TEST_F(ReasoningHttpTest, StopStringsAndUsageAsWithoutTheParser) {
  const std::string text = "<think>a STOP inside</think>Fine STOP more";
  script(text);
  Json body = reasoning_chat_body();
  body["stop"] = "STOP";
  const HttpResult r = post_json(h_.port(), "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const Json j = r.json();
  // The engine stops at the first STOP (inside the thinking): the text before it is reasoning.
  EXPECT_EQ(j["choices"][0]["message"]["reasoning_content"], "a");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "");
  EXPECT_EQ(j["choices"][0]["stop_reason"], "STOP");
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int>(text.find("STOP") + 4));
}

TEST_F(ReasoningHttpTest, StructuredOutputsAreNotSplit) {
  script("<think>x</think>{}");
  Json body = reasoning_chat_body();
  body["response_format"] = {{"type", "json_object"}};
  const Json c = message(body);
  EXPECT_EQ(c["message"]["content"], "<think>x</think>{}");
  EXPECT_FALSE(c["message"].contains("reasoning_content"));
}

class DeepSeekReasoningHttpTest : public ReasoningHttpTest {
 protected:
  DeepSeekReasoningHttpTest() : ReasoningHttpTest(ReasoningParser::kDeepSeekR1) {}
};

TEST_F(DeepSeekReasoningHttpTest, ThinksFirstUnlessThePromptClosedIt) {
  script("Hmm.</think>Yes.");
  Json c = message(reasoning_chat_body());
  EXPECT_EQ(c["message"]["reasoning_content"], "Hmm.");
  EXPECT_EQ(c["message"]["content"], "Yes.");
  script("<think>Hmm.</think>Yes.");  // the model opening it itself
  c = message(reasoning_chat_body());
  EXPECT_EQ(c["message"]["reasoning_content"], "Hmm.");
  EXPECT_EQ(c["message"]["content"], "Yes.");
}

}  // namespace
}  // namespace keel::server::testing
