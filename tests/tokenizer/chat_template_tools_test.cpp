// Real chat templates on tool-calling and reasoning conversations: tool schemas rendered with
// tojson (Python json.dumps layout, key order kept), tool calls and tool results in each family's
// format, Qwen3 / DeepSeek-R1 reasoning stripped from history, thinking switches.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tokenizer/chat_template.h"

namespace keel::tokenizer {
namespace {

using nlohmann::ordered_json;

Result<std::string> render_file(const std::string& file, const std::vector<ChatMessage>& messages,
                                const std::string& bos, const std::string& eos,
                                ordered_json tools = nullptr, ordered_json extra = nullptr) {
  auto t = ChatTemplate::parse(testing::read_file(testing::shared_path("chat-templates/" + file)));
  if (!t.ok()) return t.error();
  ChatRenderOptions options;
  options.bos_token = bos;
  options.eos_token = eos;
  options.tools = std::move(tools);
  options.extra_context = std::move(extra);
  options.now = [] { return std::chrono::sys_days{std::chrono::year{2025} / 3 / 5}; };
  return t->render(messages, options);
}

ordered_json weather_tools() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Get the weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
}

// system, user, an assistant turn that calls get_weather(city="Paris"), the tool's result.
std::vector<ChatMessage> tool_conversation() {
  return {
      {"system", "You are a helpful assistant.", nullptr},
      {"user", "Hello!", nullptr},
      {"assistant", "", ordered_json::parse(R"({"tool_calls": [{"id": "call12345",
          "type": "function", "function": {"name": "get_weather",
          "arguments": {"city": "Paris"}}}]})")},
      {"tool", "{\"temp\": 21}", {{"tool_call_id", "call12345"}}},
  };
}

const char kQwenToolsHeader[] =
    "<|im_start|>system\nYou are a helpful assistant.\n\n# Tools\n\nYou may call one or more "
    "functions to assist with the user query.\n\nYou are provided with function signatures within "
    "<tools></tools> XML tags:\n<tools>\n{\"type\": \"function\", \"function\": {\"name\": "
    "\"get_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
const char kQwenToolTurns[] =
    "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{\"name\": "
    "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
    "<|im_start|>user\n<tool_response>\n{\"temp\": 21}\n</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

TEST(ToolTemplateTest, Qwen25AndQwen3) {
  KEEL_REQUIRE_SHARED();
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja"}) {
    auto out = render_file(file, tool_conversation(), "", "<|im_end|>", weather_tools());
    ASSERT_TRUE(out.ok()) << file << ": " << out.error().to_string();
    EXPECT_EQ(*out, std::string(kQwenToolsHeader) + kQwenToolTurns) << file;
  }
}

TEST(ToolTemplateTest, Llama31PutsToolsInTheFirstUserTurn) {
  KEEL_REQUIRE_SHARED();
  auto out = render_file("meta-llama-Llama-3.1-8B-Instruct.jinja", tool_conversation(),
                         "<|begin_of_text|>", "<|eot_id|>", weather_tools());
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(
      *out,
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: "
      "ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou are a "
      "helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nGiven the following "
      "functions, please respond with a JSON for a function call with its proper arguments that "
      "best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
      "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n{\n    "
      "\"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        "
      "\"description\": \"Get the weather\",\n        \"parameters\": {\n            \"type\": "
      "\"object\",\n            \"properties\": {\n                \"city\": {\n                   "
      " \"type\": \"string\"\n                }\n            },\n            \"required\": [\n     "
      "           \"city\"\n            ]\n        }\n    "
      "}\n}\n\nHello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": "
      "\"get_weather\", \"parameters\": {\"city\": "
      "\"Paris\"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp\\\": "
      "21}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ToolTemplateTest, MistralNemo) {
  KEEL_REQUIRE_SHARED();
  auto out = render_file("mistralai-Mistral-Nemo-Instruct-2407.jinja", tool_conversation(), "<s>",
                         "</s>", weather_tools());
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<s>[AVAILABLE_TOOLS][{\"type\": \"function\", \"function\": {\"name\": "
            "\"get_weather\", \"description\": \"Get the weather\", \"parameters\": {\"type\": "
            "\"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": "
            "[\"city\"]}}}][/AVAILABLE_TOOLS][INST]Hello![/INST][TOOL_CALLS][{\"name\": "
            "\"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
            "\"call12345\"}]</s>[TOOL_RESULTS]{\"content\": {\"temp\": 21}, \"call_id\": "
            "\"call12345\"}[/TOOL_RESULTS]");
  // Mistral wants 9-character tool call ids.
  auto bad = tool_conversation();
  bad[3].extra["tool_call_id"] = "short";
  auto err = render_file("mistralai-Mistral-Nemo-Instruct-2407.jinja", bad, "<s>", "</s>",
                         weather_tools());
  ASSERT_FALSE(err.ok());
  EXPECT_NE(err.error().message().find("length 9"), std::string::npos);
}

TEST(ToolTemplateTest, Granite33) {
  KEEL_REQUIRE_SHARED();
  auto out = render_file("ibm-granite-granite-3.3-2B-Instruct.jinja", tool_conversation(),
                         "<|end_of_text|>", "<|end_of_text|>", weather_tools());
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<|start_of_role|>system<|end_of_role|>You are a helpful "
            "assistant.<|end_of_text|>\n<|start_of_role|>available_tools<|end_of_role|>[\n    {\n  "
            "      \"type\": \"function\",\n        \"function\": {\n            \"name\": "
            "\"get_weather\",\n            \"description\": \"Get the weather\",\n            "
            "\"parameters\": {\n                \"type\": \"object\",\n                "
            "\"properties\": {\n                    \"city\": {\n                        \"type\": "
            "\"string\"\n                    }\n                },\n                \"required\": "
            "[\n                    \"city\"\n                ]\n            }\n        }\n    "
            "}\n]<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n<|"
            "start_of_role|>assistant<|end_of_role|><|end_of_text|>\n<|start_of_role|>tool<|end_of_"
            "role|>{\"temp\": 21}<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
}

const std::vector<ChatMessage> kReasoningHistory = {
    {"user", "Hello!", nullptr},
    {"assistant", "<think>\nThe user greets.\n</think>\n\nHi!", nullptr},
    {"user", "Bye", nullptr},
};

TEST(ReasoningTemplateTest, Qwen3DropsOldReasoningAndCanDisableThinking) {
  KEEL_REQUIRE_SHARED();
  auto out = render_file("Qwen-Qwen3-0.6B.jinja", kReasoningHistory, "", "<|im_end|>");
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi!<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
  auto no_think = render_file("Qwen-Qwen3-0.6B.jinja", {kReasoningHistory[0]}, "", "<|im_end|>",
                              nullptr, {{"enable_thinking", false}});
  ASSERT_TRUE(no_think.ok());
  EXPECT_EQ(*no_think,
            "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ReasoningTemplateTest, DeepSeekR1DropsOldReasoning) {
  KEEL_REQUIRE_SHARED();
  auto out = render_file("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", kReasoningHistory, "<B>",
                         "<E>");
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  // The template writes its end-of-sentence token literally (not eos_token).
  const std::string user = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
  const std::string assistant =
      "<\xEF\xBD\x9C"
      "Assistant\xEF\xBD\x9C>";
  const std::string end =
      "<\xEF\xBD\x9C"
      "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";
  EXPECT_EQ(*out, "<B>" + user + "Hello!" + assistant + "\n\nHi!" + end + user + "Bye" + assistant +
                      "<think>\n</think>");
}

TEST(ReasoningTemplateTest, SmolLM3NoThinkFromTheSystemPrompt) {
  KEEL_REQUIRE_SHARED();
  std::vector<ChatMessage> messages = {{"system", "Be brief. /no_think", nullptr},
                                       {"user", "Hello!", nullptr},
                                       {"assistant", "Hi.", nullptr},
                                       {"user", "Bye", nullptr}};
  auto out = render_file("HuggingFaceTB-SmolLM3-3B.jinja", messages, "", "<|im_end|>");
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: "
            "/no_think\n\n## Custom Instructions\n\nBe brief.\n\n<|im_end|>\n<|im_start|>user\n"
            "Hello!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\nHi.<|im_end|>\n"
            "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n");
}

}  // namespace
}  // namespace keel::tokenizer
