// Tool calling without a server: request validation (tool_request.h), family detection on the
// real templates of shared/chat-templates (tool_format.h), the output parsers and their streaming
// form per family (tool_call_parser.h), the prompts the real Qwen2.5, Llama 3.1 and Mistral Nemo
// templates render for tools, past calls and tool results (tool_prompt.h + the chat formatter),
// keel's generic convention, and the forced-call grammars (tool_grammar.h) driven by a random
// "model" over the stories260K vocabulary: every output they allow parses into calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "gguf/reader.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_constraint.h"
#include "server/chat_formatter.h"
#include "server/generation_request.h"
#include "server/tool_call_parser.h"
#include "server/tool_call_stream.h"
#include "server/tool_grammar.h"
#include "server/tool_prompt.h"
#include "support/test_support.h"
#include "test_vocab.h"

namespace keel::server {
namespace {

using OJson = nlohmann::ordered_json;

Json weather_tool() {
  return Json::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
      "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}})");
}

Json add_tool() {
  return Json::parse(R"({"type": "function", "function": {"name": "add",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"},
      "b": {"type": "integer"}}, "required": ["a", "b"]}}})");
}

Json body_with(Json tools, Json choice = nullptr) {
  Json b = {{"messages", Json::array({Json{{"role", "user"}, {"content", "hi"}}})},
            {"tools", std::move(tools)}};
  if (!choice.is_null()) b["tool_choice"] = std::move(choice);
  return b;
}

ToolRequest parsed(const Json& body) {
  ToolRequest r;
  MaybeError e = parse_tool_request(body, &r);
  EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
  return r;
}

std::string error_param(const Json& body) {
  ToolRequest r;
  MaybeError e = parse_tool_request(body, &r);
  if (!e) return "(accepted)";
  EXPECT_EQ(e->status, 400);
  return e->param.value_or("");
}

TEST(ToolRequestTest, DefaultsAndChoices) {
  ToolRequest r = parsed(body_with(Json::array({weather_tool(), add_tool()})));
  EXPECT_EQ(r.choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.parallel);
  ASSERT_EQ(r.tools.size(), 2u);
  EXPECT_EQ(r.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools[0].description, "Weather of a city");
  EXPECT_EQ(r.tools[1].parameters["required"], nlohmann::ordered_json::array({"a", "b"}));
  EXPECT_EQ(parsed(body_with(Json::array({weather_tool()}), "required")).choice,
            ToolChoice::kRequired);
  EXPECT_EQ(parsed(body_with(Json::array({weather_tool()}), "none")).choice, ToolChoice::kNone);
  ToolRequest named = parsed(body_with(Json::array({weather_tool(), add_tool()}),
                                       {{"type", "function"}, {"function", {{"name", "add"}}}}));
  EXPECT_EQ(named.choice, ToolChoice::kNamed);
  EXPECT_EQ(named.forced_name, "add");
  Json b = body_with(Json::array({weather_tool()}));
  b["parallel_tool_calls"] = false;
  EXPECT_FALSE(parsed(b).parallel);
  EXPECT_EQ(parsed(Json::object()).choice, ToolChoice::kNone);
  EXPECT_EQ(parsed(body_with(Json::array())).choice, ToolChoice::kNone);
  // No parameters: a function of no arguments.
  ToolRequest bare =
      parsed(body_with(Json::array({Json{{"type", "function"}, {"function", {{"name", "now"}}}}})));
  EXPECT_EQ(bare.tools[0].parameters, nlohmann::ordered_json({{"type", "object"}}));
}

TEST(ToolRequestTest, RefusesBadToolsAndChoices) {
  Json bad_name = weather_tool();
  bad_name["function"]["name"] = "get weather";
  EXPECT_EQ(error_param(body_with(Json::array({bad_name}))), "tools[0].function.name");
  EXPECT_EQ(error_param(body_with(Json::array({weather_tool(), weather_tool()}))),
            "tools[1].function.name");
  Json not_fn = weather_tool();
  not_fn["type"] = "retrieval";
  EXPECT_EQ(error_param(body_with(Json::array({not_fn}))), "tools[0].type");
  Json fmt = weather_tool();
  fmt["function"]["parameters"]["properties"]["city"]["format"] = "regex";
  ToolRequest r;
  MaybeError e = parse_tool_request(body_with(Json::array({fmt})), &r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "tools[0].function.parameters");
  EXPECT_EQ(e->code, "unsupported_value");
  EXPECT_NE(e->message.find("`format`"), std::string::npos) << e->message;
  Json scalar = weather_tool();
  scalar["function"]["parameters"] = {{"type", "string"}};
  EXPECT_EQ(error_param(body_with(Json::array({scalar}))), "tools[0].function.parameters.type");
  EXPECT_EQ(error_param(body_with(Json::array({weather_tool()}),
                                  {{"type", "function"}, {"function", {{"name", "nope"}}}})),
            "tool_choice");
  EXPECT_EQ(error_param(body_with(Json::array({weather_tool()}), "sometimes")), "tool_choice");
  EXPECT_EQ(error_param(body_with(Json::array(), "required")), "tool_choice");
  EXPECT_EQ(error_param(body_with("get_weather")), "tools");
  Json many = Json::array();
  for (int i = 0; i < 129; ++i) {
    Json t = add_tool();
    t["function"]["name"] = "f" + std::to_string(i);
    many.push_back(t);
  }
  EXPECT_EQ(error_param(body_with(many)), "tools");
}

TEST(ToolRequestTest, MessagesCarryToolCallsAndToolResults) {
  const ParseLimits limits{.vocab_size = 100};
  Json body = body_with(Json::array({weather_tool()}));
  body["messages"] = Json::parse(R"([
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}])");
  ApiResult<GenerationSpec> s = parse_chat_request(body, limits);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const ChatMessage& a = s.value().messages[1];
  EXPECT_EQ(a.content, "");
  ASSERT_TRUE(a.tool_calls.is_array());
  EXPECT_EQ(a.tool_calls[0]["id"], "call_1");
  EXPECT_EQ(a.tool_calls[0]["function"]["arguments"]["city"], "Paris");  // a mapping
  EXPECT_EQ(s.value().messages[2].tool_call_id, "call_1");

  Json bad_args = body;
  bad_args["messages"][1]["tool_calls"][0]["function"]["arguments"] = Json{{"city", "Paris"}};
  ApiResult<GenerationSpec> e2 = parse_chat_request(bad_args, limits);
  ASSERT_FALSE(e2.ok());
  EXPECT_EQ(e2.error().param, "messages[1].tool_calls[0].function.arguments");
  Json forced_and_json = body;
  forced_and_json["tool_choice"] = "required";
  forced_and_json["response_format"] = {{"type", "json_object"}};
  ApiResult<GenerationSpec> e3 = parse_chat_request(forced_and_json, limits);
  ASSERT_FALSE(e3.ok());
  EXPECT_EQ(e3.error().param, "tool_choice");
}

std::string template_text(const std::string& file) {
  return keel::testing::read_file(keel::testing::shared_path("chat-templates/" + file));
}

TEST(ToolFormatTest, DetectsTheFamiliesOfTheRealTemplates) {
  KEEL_REQUIRE_SHARED();
  const std::pair<const char*, ToolFamily> cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolFamily::kHermes},
      {"Qwen-Qwen3-0.6B.jinja", ToolFamily::kHermes},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolFamily::kLlama3},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", ToolFamily::kLlama3},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolFamily::kMistral},
      {"google-gemma-2-2b-it.jinja", ToolFamily::kGeneric},
  };
  for (const auto& [file, family] : cases) {
    const ToolFormat f = detect_tool_format(template_text(file));
    EXPECT_EQ(tool_family_name(f.family), tool_family_name(family)) << file;
    EXPECT_EQ(f.template_renders_tools, family != ToolFamily::kGeneric) << file;
  }
  EXPECT_FALSE(
      detect_tool_format(tokenizer::ChatTemplate::chatml().source()).template_renders_tools);
}

TEST(ToolFormatTest, CallIds) {
  const std::string a = make_tool_call_id(ToolFamily::kHermes, "req1", 0, 0);
  EXPECT_EQ(a.substr(0, 5), "call_");
  EXPECT_EQ(a.size(), 29u);
  EXPECT_NE(a, make_tool_call_id(ToolFamily::kHermes, "req1", 0, 1));
  EXPECT_NE(a, make_tool_call_id(ToolFamily::kHermes, "req1", 1, 0));
  EXPECT_NE(a, make_tool_call_id(ToolFamily::kHermes, "req2", 0, 0));
  const std::string m = make_tool_call_id(ToolFamily::kMistral, "req1", 0, 0);
  ASSERT_EQ(m.size(), 9u);
  for (char c : m) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c))) << m;
}

// Every block of an id is drawn from a full-width hash: no id ends in a run of one character (an
// earlier id reused the small quotient left after 8 characters, and about 1 id in 300 ended in
// 16 'a's). A run of 8 equal characters has a chance of about 1e-11 per uniform id.
TEST(ToolFormatTest, CallIdsHaveNoLongRuns) {
  for (int r = 0; r < 20000; ++r) {
    const std::string id = make_tool_call_id(ToolFamily::kHermes, fmt::format("req-{}", r), 0, 0);
    size_t run = 1;
    size_t longest = 1;
    for (size_t i = 6; i < id.size(); ++i) {
      run = id[i] == id[i - 1] ? run + 1 : 1;
      longest = std::max(longest, run);
    }
    ASSERT_LT(longest, 8u) << id;
  }
}

ToolRequest two_tools(ToolChoice choice = ToolChoice::kAuto, bool parallel = true) {
  ToolRequest r = parsed(body_with(Json::array({weather_tool(), add_tool()})));
  r.choice = choice;
  if (choice == ToolChoice::kNamed) r.forced_name = "add";
  r.parallel = parallel;
  return r;
}

TEST(ToolParserTest, Hermes) {
  const ToolRequest r = two_tools();
  ParsedToolOutput p = parse_tool_output(
      ToolFamily::kHermes,
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, "
      "\"b\": 2}}\n</tool_call>",
      r);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.content, "Let me check.");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
  EXPECT_EQ(p.calls[1].arguments, R"({"a":1,"b":2})");
  // A block that is not JSON stays in the content, as written; no block: all content.
  p = parse_tool_output(ToolFamily::kHermes, "a <tool_call>oops</tool_call> b", r);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "a <tool_call>oops</tool_call> b");
  p = parse_tool_output(ToolFamily::kHermes, "Just text {\"name\": \"add\"}", r);
  EXPECT_TRUE(p.calls.empty());
  // Unterminated (cut by the length limit) but complete JSON: still a call.
  p = parse_tool_output(ToolFamily::kHermes, "<tool_call>\n{\"name\": \"add\", \"arguments\": {}}",
                        r);
  ASSERT_EQ(p.calls.size(), 1u);
  // parallel_tool_calls false: the first call only.
  const ToolRequest single = two_tools(ToolChoice::kAuto, false);
  p = parse_tool_output(ToolFamily::kHermes,
                        "<tool_call>{\"name\": \"add\"}</tool_call><tool_call>{\"name\": "
                        "\"get_weather\"}</tool_call>",
                        single);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "add");
  EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(ToolParserTest, JsonFamilies) {
  const ToolRequest r = two_tools();
  ParsedToolOutput p = parse_tool_output(
      ToolFamily::kLlama3, " {\"name\": \"add\", \"parameters\": {\"a\": 1, \"b\": 2}}", r);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"a":1,"b":2})");
  EXPECT_EQ(p.content, "");
  p = parse_tool_output(ToolFamily::kLlama3,
                        "<|python_tag|>{\"name\": \"add\", \"parameters\": \"{\\\"a\\\": 3}\"}", r);
  ASSERT_EQ(p.calls.size(), 1u);  // arguments given as a JSON string are accepted too
  EXPECT_EQ(p.calls[0].arguments, R"({"a":3})");
  p = parse_tool_output(ToolFamily::kMistral,
                        "[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}, "
                        "\"id\": \"abcDEF123\"}, {\"name\": \"get_weather\", \"arguments\": "
                        "{\"city\": \"Rome\"}}]",
                        r);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].name, "get_weather");
  p = parse_tool_output(ToolFamily::kGeneric, "{\"name\": \"add\", \"arguments\": {\"a\": 1}}", r);
  ASSERT_EQ(p.calls.size(), 1u);
  p = parse_tool_output(ToolFamily::kGeneric,
                        "[{\"name\": \"add\", \"arguments\": {}}, {\"name\": \"add\"}]", r);
  EXPECT_EQ(p.calls.size(), 2u);
  // Not a call: unknown function, JSON that is not a call, plain text, a broken document.
  for (const char* text : {"{\"name\": \"rm_rf\", \"arguments\": {}}", "{\"answer\": 42}",
                           "The answer is 42.", "{\"name\": \"add\", \"arguments\": {"}) {
    p = parse_tool_output(ToolFamily::kGeneric, text, r);
    EXPECT_TRUE(p.calls.empty()) << text;
    EXPECT_EQ(p.content, text);
  }
  // Llama 3 makes one call per turn: an array is content.
  p = parse_tool_output(ToolFamily::kLlama3, "[{\"name\": \"add\", \"parameters\": {}}]", r);
  EXPECT_TRUE(p.calls.empty());
}

// Feeds `text` in pieces of `step` bytes; returns the content streamed before the end, and the
// end's content with the calls the deltas built (all of them).
std::pair<std::string, ParsedToolOutput> stream(ToolFamily family, const ToolRequest& r,
                                                std::string_view text, size_t step) {
  ToolCallStream s(family, &r);
  std::string content;
  ParsedToolOutput end;
  auto take = [&end](std::vector<ToolCallDelta> deltas) {
    for (ToolCallDelta& d : deltas) {
      if (d.start) end.calls.push_back({.name = d.name});
      end.calls.at(d.index).arguments += d.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += step) {
    ToolStreamOutput o = s.push(text.substr(i, step));
    content += o.content;
    take(std::move(o.deltas));
  }
  ToolStreamOutput o = s.finish();
  end.content = std::move(o.content);
  take(std::move(o.deltas));
  EXPECT_EQ(s.num_calls(), end.calls.size());
  return {content, std::move(end)};
}

TEST(ToolParserTest, StreamsContentUntilACallMayStart) {
  const ToolRequest r = two_tools();
  const std::string text =
      "Sure <tool<x> then <tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": "
      "2}}\n</tool_call> bye";
  for (size_t step : {1, 3, 7, 1000}) {
    auto [content, end] = stream(ToolFamily::kHermes, r, text, step);
    EXPECT_EQ(content, "Sure <tool<x> then ") << step;  // the partial marker was released
    ASSERT_EQ(end.calls.size(), 1u) << step;
    EXPECT_EQ(end.content, "bye");
    const ParsedToolOutput whole = parse_tool_output(ToolFamily::kHermes, text, r);
    EXPECT_EQ(content + end.content, "Sure <tool<x> then bye");
    EXPECT_EQ(whole.calls[0].arguments, end.calls[0].arguments);
  }
  // JSON families: plain text streams at once; output opening with { is held to the end.
  auto [plain, plain_end] = stream(ToolFamily::kGeneric, r, "  Hello {x}", 2);
  EXPECT_EQ(plain, "  Hello {x}");
  EXPECT_TRUE(plain_end.calls.empty());
  EXPECT_EQ(plain_end.content, "");
  auto [held, call] = stream(ToolFamily::kGeneric, r, " {\"name\": \"add\"}", 2);
  EXPECT_EQ(held, "");
  ASSERT_EQ(call.calls.size(), 1u);
  auto [held2, not_call] = stream(ToolFamily::kGeneric, r, "{\"x\": 1}", 2);
  EXPECT_EQ(held2 + not_call.content, "{\"x\": 1}");
  EXPECT_TRUE(not_call.calls.empty());
  // Forced: nothing is released before the end.
  const ToolRequest forced = two_tools(ToolChoice::kRequired);
  auto [none, forced_end] =
      stream(ToolFamily::kHermes, forced, "<tool_call>{\"name\": \"add\"}</tool_call>", 4);
  EXPECT_EQ(none, "");
  EXPECT_EQ(forced_end.calls.size(), 1u);
}

// The conversation of a tool round trip, as the server parses it.
std::vector<ChatMessage> round_trip_messages(const std::string& call_id) {
  const ParseLimits limits{.vocab_size = 100};
  Json body = body_with(Json::array({weather_tool()}));
  body["messages"] = Json::array(
      {Json{{"role", "system"}, {"content", "Be brief."}},
       Json{{"role", "user"}, {"content", "Weather in Paris?"}},
       Json{{"role", "assistant"},
            {"content", nullptr},
            {"tool_calls", Json::array({Json{{"id", call_id},
                                             {"type", "function"},
                                             {"function",
                                              {{"name", "get_weather"},
                                               {"arguments", "{\"city\": \"Paris\"}"}}}}})}},
       Json{{"role", "tool"}, {"tool_call_id", call_id}, {"content", "18 C"}}});
  ApiResult<GenerationSpec> s = parse_chat_request(body, limits);
  EXPECT_TRUE(s.ok());
  return s.ok() ? s.value().messages : std::vector<ChatMessage>{};
}

std::string render(const std::string& file, const std::vector<ChatMessage>& messages) {
  auto tmpl = tokenizer::ChatTemplate::parse(template_text(file));
  EXPECT_TRUE(tmpl.ok());
  if (!tmpl.ok()) return "";
  const tokenizer::Tokenizer tok = testing::make_test_tokenizer();
  const ToolFormat format = detect_tool_format(tmpl->source());
  const ToolRequest request = parsed(body_with(Json::array({weather_tool()})));
  const ToolPrompt tp = tool_prompt(messages, request, format);
  ChatFormatter f = template_chat_formatter(
      std::make_shared<const tokenizer::ChatTemplate>(std::move(tmpl).value()), &tok);
  Result<tokenizer::TrackedText> text = f(tp.messages, true, tp.tools, nullptr);
  EXPECT_TRUE(text.ok()) << text.error().to_string();
  return text.ok() ? text->text : "";
}

// The template's rendering of the past call parses back into that call with the family's parser.
void expect_call_renders_and_parses(ToolFamily family, const std::string& rendered,
                                    const std::string& call_text) {
  const size_t at = rendered.find(call_text);
  ASSERT_NE(at, std::string::npos) << rendered;
  const ParsedToolOutput p =
      parse_tool_output(family, call_text, parsed(body_with(Json::array({weather_tool()}))));
  ASSERT_EQ(p.calls.size(), 1u) << call_text;
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris"})");
}

TEST(ToolTemplateTest, Qwen25RendersToolsCallsAndResults) {
  KEEL_REQUIRE_SHARED();
  const std::string text = render("Qwen-Qwen2.5-7B-Instruct.jinja", round_trip_messages("call_1"));
  EXPECT_NE(text.find("# Tools"), std::string::npos) << text;
  EXPECT_NE(text.find("<tools>\n{\"function\": {\"description\": \"Weather of a city\", \"name\": "
                      "\"get_weather\""),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("<|im_start|>user\n<tool_response>\n18 C\n</tool_response><|im_end|>"),
            std::string::npos)
      << text;
  expect_call_renders_and_parses(ToolFamily::kHermes, text,
                                 "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                                 "{\"city\": \"Paris\"}}\n</tool_call>");
}

TEST(ToolTemplateTest, Llama31RendersToolsCallsAndResults) {
  KEEL_REQUIRE_SHARED();
  const std::string text =
      render("meta-llama-Llama-3.1-8B-Instruct.jinja", round_trip_messages("call_1"));
  EXPECT_NE(text.find("Environment: ipython"), std::string::npos) << text;
  // A string result is `tojson`ed (a Jinja string is iterable), as Hugging Face renders it.
  EXPECT_NE(text.find("\"name\": \"get_weather\""), std::string::npos) << text;
  EXPECT_NE(text.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"18 C\"<|eot_id|>"),
            std::string::npos)
      << text;
  expect_call_renders_and_parses(
      ToolFamily::kLlama3, text,
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}");
}

TEST(ToolTemplateTest, MistralNemoRendersToolsCallsAndResults) {
  KEEL_REQUIRE_SHARED();
  const std::string id = make_tool_call_id(ToolFamily::kMistral, "r", 0, 0);
  const std::string text =
      render("mistralai-Mistral-Nemo-Instruct-2407.jinja", round_trip_messages(id));
  EXPECT_NE(text.find("[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("[TOOL_RESULTS]{\"content\": 18 C, \"call_id\": \"" + id + "\"}"),
            std::string::npos)
      << text;
  expect_call_renders_and_parses(
      ToolFamily::kMistral, text,
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": \"" +
          id + "\"}]");
}

TEST(ToolTemplateTest, GenericConventionWritesToolsAndCallsAsText) {
  const ToolRequest request = parsed(body_with(Json::array({weather_tool()})));
  const ToolFormat chatml = detect_tool_format(tokenizer::ChatTemplate::chatml().source());
  const ToolPrompt tp = tool_prompt(round_trip_messages("call_1"), request, chatml);
  EXPECT_TRUE(tp.tools.is_null());
  ASSERT_EQ(tp.messages.size(), 4u);
  EXPECT_EQ(tp.messages[0].content, generic_tools_text(request) + "\n\nBe brief.");
  EXPECT_NE(tp.messages[0].content.find("\"name\":\"get_weather\""), std::string::npos);
  EXPECT_EQ(tp.messages[2].content, R"({"name":"get_weather","arguments":{"city":"Paris"}})");
  EXPECT_TRUE(tp.messages[2].tool_calls.is_null());
  EXPECT_EQ(tp.messages[3].role, "tool");
  // The past call, as written, parses back with the generic parser.
  EXPECT_EQ(parse_tool_output(ToolFamily::kGeneric, tp.messages[2].content, request).calls.size(),
            1u);
  // No system message: one is added. tool_choice none: no tool text, past calls still written.
  std::vector<ChatMessage> no_system = round_trip_messages("call_1");
  no_system.erase(no_system.begin());
  EXPECT_EQ(tool_prompt(no_system, request, chatml).messages[0].role, "system");
  ToolRequest none = request;
  none.choice = ToolChoice::kNone;
  const ToolPrompt off = tool_prompt(no_system, none, chatml);
  EXPECT_EQ(off.messages[0].role, "user");
  EXPECT_EQ(off.messages[1].content, R"({"name":"get_weather","arguments":{"city":"Paris"}})");
}

// A random "model": at every step a uniformly random token among those the grammar allows.
std::string random_constrained_output(const std::string& gbnf, const tokenizer::Tokenizer& tok,
                                      uint32_t seed, int max_tokens, bool* ended) {
  Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << gbnf;
  if (!g.ok()) return "";
  auto trie = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(tok));
  auto masker = std::make_shared<grammar::TokenMasker>(
      std::make_shared<const grammar::Grammar>(std::move(g).value()), trie);
  grammar::GrammarConstraint c(masker, max_tokens);
  std::mt19937 rng(seed);
  std::string text;
  *ended = false;
  for (int i = 0; i < max_tokens && !*ended; ++i) {
    const grammar::TokenBits& bits = c.allowed();
    std::vector<int32_t> options;
    for (int32_t t = 0; t < trie->vocab_size(); ++t) {
      if (grammar::test_bit(bits, t)) options.push_back(t);
    }
    if (options.empty()) break;
    const int32_t t = options[rng() % options.size()];
    *ended = tok.is_eog(t);
    if (!*ended) text += trie->piece(t);
    c.accept(t);
  }
  return text;
}

TEST(ToolGrammarTest, RandomOutputsOfForcedGrammarsAlwaysParse) {
  KEEL_REQUIRE_SHARED();
  auto file =
      gguf::GgufFile::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"),
                           {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  uint32_t seed = 1;
  for (ToolFamily family :
       {ToolFamily::kGeneric, ToolFamily::kHermes, ToolFamily::kLlama3, ToolFamily::kMistral}) {
    for (auto [choice, parallel] :
         {std::pair{ToolChoice::kRequired, true}, std::pair{ToolChoice::kRequired, false},
          std::pair{ToolChoice::kNamed, true}}) {
      const ToolRequest r = two_tools(choice, parallel);
      Result<std::string> gbnf = forced_tool_grammar(family, r);
      ASSERT_TRUE(gbnf.ok()) << gbnf.error().to_string();
      for (int walk = 0; walk < 4; ++walk) {
        bool ended = false;
        const std::string out = random_constrained_output(*gbnf, *tok, seed++, 160, &ended);
        const std::string what = std::string(tool_family_name(family)) + ": " + out;
        EXPECT_TRUE(ended) << what;
        const ParsedToolOutput p = parse_tool_output(family, out, r);
        ASSERT_FALSE(p.calls.empty()) << what;
        EXPECT_EQ(p.content, "") << what;
        if (!parallel || family == ToolFamily::kLlama3) {
          EXPECT_EQ(p.calls.size(), 1u) << what;
        }
        for (const ToolCall& call : p.calls) {
          if (choice == ToolChoice::kNamed) {
            EXPECT_EQ(call.name, "add") << what;
          }
          const Json args = Json::parse(call.arguments);
          const char* must = call.name == "add" ? "b" : "city";
          EXPECT_TRUE(args.contains(must)) << what;
          if (call.name == "add") {
            EXPECT_TRUE(args["a"].is_number_integer()) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace keel::server

namespace keel::server {
namespace {

// Whether `text` is a complete output of `gbnf`.
bool grammar_accepts(const std::string& gbnf, std::string_view text) {
  Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << gbnf;
  if (!g.ok()) return false;
  grammar::StackSet state = grammar::initial_state(*g);
  return grammar::advance(*g, text, &state) && state.has_complete();
}

// tool_choice "auto": free text or well-formed calls, never a malformed call.
TEST(ToolGrammarTest, AutoAllowsTextOrWellFormedCalls) {
  const ToolRequest r = two_tools(ToolChoice::kAuto, true);
  Result<std::string> hermes = auto_tool_grammar(ToolFamily::kHermes, r);
  ASSERT_TRUE(hermes.ok()) << hermes.error().to_string();
  for (const char* ok : {"", "Sure, <tool maybe <tool_cal.\n", "a < b <<tool_ca",
                         "Let me add.<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, "
                         "\"b\": 2}}\n</tool_call> Done."}) {
    EXPECT_TRUE(grammar_accepts(*hermes, ok)) << ok;
  }
  for (const char* bad : {"<tool_call>\nnot json\n</tool_call>", "x <tool_call>",
                          "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": \"x\", "
                          "\"b\": 2}}\n</tool_call>"}) {
    EXPECT_FALSE(grammar_accepts(*hermes, bad)) << bad;
  }
  for (ToolFamily family : {ToolFamily::kGeneric, ToolFamily::kLlama3, ToolFamily::kMistral}) {
    Result<std::string> g = auto_tool_grammar(family, r);
    ASSERT_TRUE(g.ok()) << g.error().to_string();
    const std::string key = family == ToolFamily::kLlama3 ? "parameters" : "arguments";
    const std::string call = "{\"name\": \"add\", \"" + key + "\": {\"a\": 1, \"b\": 2}}";
    const std::string well_formed = family == ToolFamily::kMistral ? "[" + call + "]" : call;
    EXPECT_TRUE(grammar_accepts(*g, well_formed)) << well_formed;
    EXPECT_TRUE(grammar_accepts(*g, "  The answer is {42}.\n"));
    EXPECT_FALSE(grammar_accepts(*g, "{\"answer\": 42}"));
    EXPECT_FALSE(grammar_accepts(*g, " [1, 2]"));
    EXPECT_FALSE(grammar_accepts(*g, "{\"name\": \"rm\", \"" + key + "\": {}}"));
    const ParsedToolOutput p = parse_tool_output(family, well_formed, r);
    EXPECT_EQ(p.calls.size(), 1u);
  }
}

// Random walks under the "auto" grammars over the stories260K vocabulary: every output is either
// content without a call's trigger or calls that parse.
TEST(ToolGrammarTest, RandomOutputsOfAutoGrammarsAlwaysParse) {
  KEEL_REQUIRE_SHARED();
  auto file =
      gguf::GgufFile::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"),
                           {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto tok = tokenizer::Tokenizer::from_gguf(*file);
  ASSERT_TRUE(tok.ok());
  uint32_t seed = 100;
  for (ToolFamily family :
       {ToolFamily::kGeneric, ToolFamily::kHermes, ToolFamily::kLlama3, ToolFamily::kMistral}) {
    for (bool parallel : {true, false}) {
      const ToolRequest r = two_tools(ToolChoice::kAuto, parallel);
      Result<std::string> gbnf = auto_tool_grammar(family, r);
      ASSERT_TRUE(gbnf.ok()) << gbnf.error().to_string();
      for (int walk = 0; walk < 4; ++walk) {
        bool ended = false;
        const std::string out = random_constrained_output(*gbnf, *tok, seed++, 80, &ended);
        const std::string what = std::string(tool_family_name(family)) + ": " + out;
        const ParsedToolOutput p = parse_tool_output(family, out, r);
        if (family == ToolFamily::kHermes) {
          EXPECT_EQ(p.content.find("<tool_call>"), std::string::npos) << what;
        } else {
          const size_t first = out.find_first_not_of(" \t\r\n");
          const bool opens_call =
              first != std::string::npos && (out[first] == '{' || out[first] == '[');
          if (opens_call && ended) {
            EXPECT_FALSE(p.calls.empty()) << what;
          }
          if (!opens_call) {
            EXPECT_TRUE(p.calls.empty()) << what;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace keel::server
