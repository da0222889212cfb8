// keel's built-in chat templates (builtin_chat_templates.h) rendered on plain, tool-calling and
// reasoning conversations, the request's template kwargs (plain text, reserved names refused),
// and load_chat_template (chat_template_choice.h): names, files, inline text and every error.
#include <gtest/gtest.h>

#include <fstream>

#include "support/test_support.h"
#include "tokenizer/builtin_chat_templates.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/chat_template_choice.h"

namespace keel::tokenizer {
namespace {

using nlohmann::ordered_json;

ChatTemplate builtin(std::string_view name) {
  std::optional<ChatTemplate> t = ChatTemplate::builtin(name);
  EXPECT_TRUE(t.has_value()) << name;
  return t ? std::move(*t) : ChatTemplate::chatml();
}

std::string render(std::string_view name, const std::vector<ChatMessage>& messages,
                   ordered_json tools = nullptr, ordered_json kwargs = nullptr) {
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.eos_token = "</s>";
  options.tools = std::move(tools);
  options.template_kwargs = std::move(kwargs);
  auto out = builtin(name).render(messages, options);
  EXPECT_TRUE(out.ok()) << name << ": " << out.status().to_string();
  return out.ok() ? *out : std::string();
}

ordered_json add_tool() {
  return ordered_json::parse(R"([{"type": "function", "function": {"name": "add",
      "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}}])");
}

// user, an assistant call add(a=1), the tool's result "2".
std::vector<ChatMessage> builtin_tool_conversation() {
  return {{"system", "Be brief.", nullptr},
          {"user", "What is 1+1?", nullptr},
          {"assistant", "", ordered_json::parse(R"({"content": null, "tool_calls": [{"id":
              "abcDEF123", "type": "function", "function": {"name": "add",
              "arguments": {"a": 1}}}]})")},
          {"tool", "2", ordered_json::parse(R"({"tool_call_id": "abcDEF123"})")}};
}

TEST(BuiltinChatTemplatesTest, EveryNameParsesAndRendersAConversation) {
  ASSERT_EQ(builtin_chat_template_names().size(), 8u);
  const std::vector<ChatMessage> msgs = {{"system", "SYS", nullptr},
                                         {"user", "Hi there", nullptr},
                                         {"assistant", "Hello!", nullptr},
                                         {"user", "Bye", nullptr}};
  for (std::string_view name : builtin_chat_template_names()) {
    const std::string out = render(name, msgs);
    for (const char* part : {"SYS", "Hi there", "Hello!", "Bye"}) {
      EXPECT_NE(out.find(part), std::string::npos) << name << " lacks " << part << ":\n" << out;
    }
    // Turn order is kept: the last user turn comes after the assistant's answer.
    EXPECT_LT(out.find("Hello!"), out.rfind("Bye")) << name;
  }
  EXPECT_FALSE(ChatTemplate::builtin("chatml2").has_value());
  EXPECT_FALSE(builtin_chat_template_source("").has_value());
}

TEST(BuiltinChatTemplatesTest, GenerationPromptsPerFormat) {
  const std::vector<ChatMessage> one = {{"user", "Q", nullptr}};
  EXPECT_EQ(render("chatml", one), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("qwen2", one), "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(render("llama3", one),
            "<s><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|><|start_header_id|>"
            "assistant<|end_header_id|>\n\n");
  EXPECT_EQ(render("mistral", one), "<s>[INST]Q[/INST]");
  EXPECT_EQ(render("gemma", one), "<s><start_of_turn>user\nQ<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(render("deepseek-r1", one), "<s><｜User｜>Q<｜Assistant｜><think>\n");
  EXPECT_EQ(render("llama2", one), "<s>[INST] Q [/INST]");
}

TEST(BuiltinChatTemplatesTest, ToolFormatsRenderToolsCallsAndResults) {
  const std::string qwen = render("qwen2", builtin_tool_conversation(), add_tool());
  EXPECT_NE(qwen.find("<tools>\n{\"type\": \"function\""), std::string::npos) << qwen;
  EXPECT_NE(qwen.find("<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1}}\n</tool_call>"),
            std::string::npos)
      << qwen;
  EXPECT_NE(qwen.find("<|im_start|>user\n<tool_response>\n2\n</tool_response><|im_end|>"),
            std::string::npos)
      << qwen;
  const std::string llama = render("llama3", builtin_tool_conversation(), add_tool());
  EXPECT_NE(llama.find("\"parameters\": <arguments object>"), std::string::npos) << llama;
  EXPECT_NE(llama.find("{\"name\": \"add\", \"parameters\": {\"a\": 1}}<|eot_id|>"),
            std::string::npos)
      << llama;
  EXPECT_NE(llama.find("<|start_header_id|>ipython<|end_header_id|>\n\n2<|eot_id|>"),
            std::string::npos)
      << llama;
  const std::string mistral = render("mistral", builtin_tool_conversation(), add_tool());
  EXPECT_NE(mistral.find("[AVAILABLE_TOOLS][{\"type\": \"function\""), std::string::npos)
      << mistral;
  EXPECT_NE(mistral.find("[INST]Be brief.\n\nWhat is 1+1?[/INST]"), std::string::npos) << mistral;
  EXPECT_NE(mistral.find("[TOOL_CALLS][{\"name\": \"add\", \"arguments\": {\"a\": 1}, \"id\": "
                         "\"abcDEF123\"}]</s>"),
            std::string::npos)
      << mistral;
  EXPECT_NE(mistral.find("[TOOL_RESULTS]{\"call_id\": \"abcDEF123\", \"content\": \"2\"}"),
            std::string::npos)
      << mistral;
  // The generic-tool templates do not mention `tools`: the server describes them itself.
  for (std::string_view name : {"chatml", "llama2", "gemma", "deepseek-r1"}) {
    EXPECT_EQ(builtin_chat_template_source(name)->find("tools"), std::string::npos) << name;
  }
}

TEST(BuiltinChatTemplatesTest, Qwen3ReasoningAndThinkingSwitch) {
  std::vector<ChatMessage> msgs = {
      {"user", "Q1", nullptr},
      {"assistant", "A1", ordered_json{{"reasoning_content", "old thought"}}},
      {"user", "Q2", nullptr},
      {"assistant", "A2", ordered_json{{"reasoning_content", "\nnew thought\n"}}}};
  const std::string out = render("qwen3", msgs);
  // Only the thinking after the last user turn is kept, trimmed, in a <think> block.
  EXPECT_EQ(out.find("old thought"), std::string::npos) << out;
  EXPECT_NE(out.find("<|im_start|>assistant\n<think>\nnew thought\n</think>\n\nA2<|im_end|>"),
            std::string::npos)
      << out;
  msgs.resize(3);
  EXPECT_TRUE(render("qwen3", msgs).ends_with("<|im_start|>assistant\n"));
  EXPECT_TRUE(render("qwen3", msgs, nullptr, {{"enable_thinking", false}})
                  .ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(render("deepseek-r1", msgs, nullptr, {{"enable_thinking", false}})
                  .ends_with("<｜Assistant｜><think>\n</think>\n\n"));
  // DeepSeek-R1 drops a past answer's thinking.
  msgs[1].content = "<think>\nhmm\n</think>\n\nA1";
  const std::string r1 = render("deepseek-r1", msgs);
  EXPECT_NE(r1.find("<｜Assistant｜>A1<｜end▁of▁sentence｜>"), std::string::npos) << r1;
  EXPECT_EQ(r1.find("hmm"), std::string::npos) << r1;
}

TEST(ChatTemplateKwargsTest, TextIsPlainAndReservedNamesAreRefused) {
  auto t = ChatTemplate::parse("{{ greeting }}|{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  const std::vector<ChatMessage> msgs = {{"user", "x", nullptr}};
  ChatRenderOptions options;
  options.template_kwargs = {{"greeting", "<|im_start|>"}};
  auto out = t->render_tracked(msgs, options);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->text, "<|im_start|>|x");
  // The kwarg's text came from the request: a plain span, tokenized as text.
  ASSERT_FALSE(out->plain.empty());
  EXPECT_EQ(out->plain[0].begin, 0u);
  EXPECT_EQ(out->plain[0].end, 12u);
  options.template_kwargs = {{"messages", ordered_json::array()}};
  auto refused = t->render_tracked(msgs, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("may not set `messages`"), std::string::npos);
  options.template_kwargs = ordered_json::array();
  EXPECT_FALSE(t->render_tracked(msgs, options).ok());
}

class ChatTemplateChoiceTest : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  Result<std::optional<ChosenChatTemplate>> load(ChatTemplateChoice c) {
    return load_chat_template(c, fs_);
  }
  std::string error(ChatTemplateChoice c) {
    auto r = load(std::move(c));
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  }
  std::string dir_ = ::keel::testing::make_temp_dir("chat_template_choice");
  PosixFileSystem fs_;
};

TEST_F(ChatTemplateChoiceTest, NamesFilesAndInlineText) {
  auto none = load({});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  auto named = load({.name_or_file = "qwen3", .file = ""});
  ASSERT_TRUE(named.ok() && named->has_value());
  EXPECT_EQ((*named)->description, "built-in 'qwen3'");
  EXPECT_EQ((*named)->tmpl.source(), *builtin_chat_template_source("qwen3"));
  const std::string path = write("t.jinja", "{{ messages[0].content }}!");
  for (ChatTemplateChoice c : {ChatTemplateChoice{.name_or_file = "", .file = path},
                               ChatTemplateChoice{.name_or_file = path, .file = ""}}) {
    auto r = load(c);
    ASSERT_TRUE(r.ok() && r->has_value()) << r.status().to_string();
    EXPECT_EQ((*r)->description, "file " + path);
    const std::vector<ChatMessage> msgs = {{"user", "hey", nullptr}};
    EXPECT_EQ(*(*r)->tmpl.render(msgs, true, "", ""), "hey!");
  }
  auto inline_text = load({.name_or_file = "{{ 'fixed' }}", .file = ""});
  ASSERT_TRUE(inline_text.ok() && inline_text->has_value());
  EXPECT_EQ((*inline_text)->description, "inline text");
}

TEST_F(ChatTemplateChoiceTest, ErrorsNameTheFlagAndTheCause) {
  EXPECT_EQ(error({.name_or_file = "qwen3", .file = "x"}),
            "--chat-template and --chat-template-file both given: use one of them");
  const std::string unknown = error({.name_or_file = "qwen9", .file = ""});
  EXPECT_NE(unknown.find("--chat-template qwen9: neither a built-in template (chatml, llama2"),
            std::string::npos)
      << unknown;
  const std::string missing = error({.name_or_file = "", .file = dir_ + "/missing.jinja"});
  EXPECT_TRUE(missing.starts_with("--chat-template-file: ")) << missing;
  EXPECT_NE(missing.find("missing.jinja"), std::string::npos) << missing;
  const std::string empty = write("empty.jinja", "");
  EXPECT_EQ(error({.name_or_file = "", .file = empty}),
            "--chat-template-file " + empty + ": the file is empty");
  const std::string bad = write("bad.jinja", "ok\n{% for m in messages %}{{ m }");
  const std::string parse_error = error({.name_or_file = "", .file = bad});
  EXPECT_TRUE(parse_error.starts_with("--chat-template-file " + bad + ": chat template: line 2"))
      << parse_error;
  EXPECT_TRUE(error({.name_or_file = "{% if %}", .file = ""}).starts_with("--chat-template: "));
  const std::string dir_error = error({.name_or_file = "", .file = dir_});
  EXPECT_NE(dir_error.find("not a regular file"), std::string::npos) << dir_error;
}

}  // namespace
}  // namespace keel::tokenizer
