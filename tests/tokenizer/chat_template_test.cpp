// Chat templates of real models (shared/chat-templates/): each rendered for (a) system + user +
// assistant + user with a generation prompt, (b) a single user turn, (c) user + assistant + user
// without a generation prompt, and tool / reasoning conversations where the template has them.
// Expected strings were written from the templates' text (they are the models' published
// formats); strftime_now() runs on a fixed clock (2025-03-05 12:00 UTC).
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "support/test_support.h"
#include "tokenizer/chat_template.h"

namespace keel::tokenizer {
namespace {

using nlohmann::ordered_json;

std::chrono::system_clock::time_point fixed_clock() {
  return std::chrono::sys_days{std::chrono::year{2025} / 3 / 5} + std::chrono::hours{12};
}

const ChatMessage kSystem{"system", "You are a helpful assistant.", nullptr};
const ChatMessage kUser1{"user", "Hello!", nullptr};
const ChatMessage kAssistant1{"assistant", "Hi there! How can I help?", nullptr};
const ChatMessage kUser2{"user", "What is 2+2?", nullptr};

struct Case {
  std::string file;
  std::string bos;
  std::string eos;
};

class RealTemplateTest : public ::testing::Test {
 protected:
  ChatTemplate load(const std::string& file) {
    std::string text = testing::read_file(testing::shared_path("chat-templates/" + file));
    auto t = ChatTemplate::parse(text);
    EXPECT_TRUE(t.ok()) << file << ": " << t.error().to_string();
    return t.ok() ? std::move(t).value() : ChatTemplate::chatml();
  }

  Result<std::string> render(const Case& c, const std::vector<ChatMessage>& messages,
                             bool add_generation_prompt, ordered_json tools = nullptr,
                             ordered_json extra = nullptr) {
    ChatRenderOptions options;
    options.add_generation_prompt = add_generation_prompt;
    options.bos_token = c.bos;
    options.eos_token = c.eos;
    options.tools = std::move(tools);
    options.extra_context = std::move(extra);
    options.now = fixed_clock;
    return load(c.file).render(messages, options);
  }

  // Renders the three standard conversations and compares them with the expected strings.
  void check(const Case& c, const std::string& a, const std::string& b, const std::string& c3) {
    KEEL_REQUIRE_SHARED();
    auto ra = render(c, {kSystem, kUser1, kAssistant1, kUser2}, true);
    ASSERT_TRUE(ra.ok()) << ra.error().to_string();
    EXPECT_EQ(*ra, a);
    auto rb = render(c, {kUser1}, true);
    ASSERT_TRUE(rb.ok()) << rb.error().to_string();
    EXPECT_EQ(*rb, b);
    auto rc = render(c, {kUser1, kAssistant1, kUser2}, false);
    ASSERT_TRUE(rc.ok()) << rc.error().to_string();
    EXPECT_EQ(*rc, c3);
  }
};

const Case kLlama31{"meta-llama-Llama-3.1-8B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"};
const Case kLlama32{"meta-llama-Llama-3.2-3B-Instruct.jinja", "<|begin_of_text|>", "<|eot_id|>"};
const Case kQwen25{"Qwen-Qwen2.5-7B-Instruct.jinja", "", "<|im_end|>"};
const Case kQwen3{"Qwen-Qwen3-0.6B.jinja", "", "<|im_end|>"};
const Case kMistral{"mistralai-Mistral-Nemo-Instruct-2407.jinja", "<s>", "</s>"};
const Case kGemma2{"google-gemma-2-2b-it.jinja", "<bos>", "<eos>"};
const Case kPhi35{"microsoft-Phi-3.5-mini-instruct.jinja", "<s>", "<|endoftext|>"};
const Case kDeepSeek{"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja",
                     "<\xEF\xBD\x9C"
                     "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                     "<\xEF\xBD\x9C"
                     "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"};
const Case kSmolLM3{"HuggingFaceTB-SmolLM3-3B.jinja", "", "<|im_end|>"};
const Case kGranite{"ibm-granite-granite-3.3-2B-Instruct.jinja", "<|end_of_text|>",
                    "<|end_of_text|>"};

TEST_F(RealTemplateTest, Llama31) {
  const std::string head =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
      "December 2023\nToday Date: 26 Jul 2024\n\n";
  check(kLlama31,
        head +
            "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there! How can "
            "I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        head +
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        head +
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there! How can I help?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>");
}

TEST_F(RealTemplateTest, Llama32UsesTheInjectedClock) {
  const std::string head =
      "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
      "December 2023\nToday Date: 05 Mar 2025\n\n";
  check(kLlama32,
        head +
            "You are a helpful assistant.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there! How can "
            "I help?<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        head +
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n",
        head +
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHi there! How can I help?<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>");
}

TEST_F(RealTemplateTest, Qwen25) {
  const std::string qwen_system =
      "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
      "assistant.<|im_end|>\n";
  const std::string turns =
      "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi there! How can I "
      "help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
  check(kQwen25,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + turns +
            "<|im_start|>assistant\n",
        qwen_system + "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
        qwen_system + turns);
}

TEST_F(RealTemplateTest, Qwen3) {
  const std::string turns =
      "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi there! How can I "
      "help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
  check(kQwen3,
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n" + turns +
            "<|im_start|>assistant\n",
        "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n", turns);
}

TEST_F(RealTemplateTest, MistralNemoPutsTheSystemPromptInTheLastUserTurn) {
  check(kMistral,
        "<s>[INST]Hello![/INST]Hi there! How can I help?</s>[INST]You are a helpful "
        "assistant.\n\nWhat is 2+2?[/INST]",
        "<s>[INST]Hello![/INST]",
        "<s>[INST]Hello![/INST]Hi there! How can I help?</s>[INST]What is 2+2?[/INST]");
}

TEST_F(RealTemplateTest, Gemma2) {
  KEEL_REQUIRE_SHARED();
  // Gemma 2 refuses a system message (the template raises).
  auto ra = render(kGemma2, {kSystem, kUser1, kAssistant1, kUser2}, true);
  ASSERT_FALSE(ra.ok());
  EXPECT_EQ(ra.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ra.error().message().find("raised by template: System role not supported"),
            std::string::npos)
      << ra.error().message();
  auto rb = render(kGemma2, {kUser1}, true);
  ASSERT_TRUE(rb.ok()) << rb.error().to_string();
  EXPECT_EQ(*rb, "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\n");
  auto rc = render(kGemma2, {kUser1, kAssistant1, kUser2}, true);
  ASSERT_TRUE(rc.ok()) << rc.error().to_string();
  EXPECT_EQ(*rc,
            "<bos><start_of_turn>user\nHello!<end_of_turn>\n<start_of_turn>model\nHi there! How "
            "can I help?<end_of_turn>\n<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
            "<start_of_turn>model\n");
  auto bad = render(kGemma2, {kUser1, kUser2}, true);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("Conversation roles must alternate"), std::string::npos);
}

TEST_F(RealTemplateTest, Phi35EndsWithEosWithoutGenerationPrompt) {
  check(kPhi35,
        "<|system|>\nYou are a helpful assistant.<|end|>\n<|user|>\nHello!<|end|>\n<|assistant|>\n"
        "Hi there! How can I help?<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n",
        "<|user|>\nHello!<|end|>\n<|assistant|>\n",
        "<|user|>\nHello!<|end|>\n<|assistant|>\nHi there! How can I help?<|end|>\n<|user|>\n"
        "What is 2+2?<|end|>\n<|endoftext|>");
}

TEST_F(RealTemplateTest, DeepSeekR1Distill) {
  const std::string user = "<\xEF\xBD\x9CUser\xEF\xBD\x9C>";
  const std::string assistant =
      "<\xEF\xBD\x9C"
      "Assistant\xEF\xBD\x9C>";
  const std::string& bos = kDeepSeek.bos;
  const std::string& eos = kDeepSeek.eos;
  check(kDeepSeek,
        bos + "You are a helpful assistant." + user + "Hello!" + assistant +
            "Hi there! How can I help?" + eos + user + "What is 2+2?" + assistant +
            "<think>\n</think>",
        bos + user + "Hello!" + assistant + "<think>\n</think>",
        bos + user + "Hello!" + assistant + "Hi there! How can I help?" + eos + user +
            "What is 2+2?");
}

const char kSmolDefault[] =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an "
    "assistant involves thoroughly exploring questions through a systematic thinking process "
    "before providing the final precise and accurate solutions. This requires engaging in a "
    "comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, "
    "backtracking, and iteration to develop well-considered thinking process. Please structure "
    "your response into two main sections: Thought and Solution using the specified format: "
    "<think> Thought section </think> Solution section. In the Thought section, detail your "
    "reasoning process in steps. Each step should include detailed considerations such as "
    "analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the "
    "accuracy of the current steps, refining any errors, and revisiting previous steps. In the "
    "Solution section, based on various attempts, explorations, and reflections from the Thought "
    "section, systematically present the final solution that you deem correct. The Solution "
    "section should be logical, accurate, and concise and detail necessary steps needed to reach "
    "the conclusion.";

TEST_F(RealTemplateTest, SmolLM3) {
  const std::string head =
      "<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: "
      "/think\n\n## Custom Instructions\n\n";
  const std::string turns =
      "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\nHi there! How can I "
      "help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n";
  check(kSmolLM3,
        head + "You are a helpful assistant.\n\n<|im_end|>\n" + turns + "<|im_start|>assistant\n",
        head + kSmolDefault +
            "\n\n<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n",
        head + kSmolDefault + "\n\n<|im_end|>\n" + turns);
}

TEST_F(RealTemplateTest, Granite33) {
  const std::string default_system =
      "<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: "
      "March 05, 2025. You are Granite, developed by IBM. You are a helpful AI "
      "assistant.<|end_of_text|>\n";
  const std::string turns =
      "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n<|start_of_role|>assistant"
      "<|end_of_role|>Hi there! How can I help?<|end_of_text|>\n<|start_of_role|>user"
      "<|end_of_role|>What is 2+2?<|end_of_text|>\n";
  check(kGranite,
        "<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>\n" +
            turns + "<|start_of_role|>assistant<|end_of_role|>",
        default_system +
            "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n<|start_of_role|>"
            "assistant<|end_of_role|>",
        default_system + turns);
}

}  // namespace
}  // namespace keel::tokenizer
