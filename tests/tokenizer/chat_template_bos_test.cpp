// The built-in templates (ChatML, Llama 2), loading from GGUF metadata with the ChatML
// fallback, and the "never a double BOS" rule checked with real tokenizers (stories260K and the
// llama-spm vocabulary add BOS; gpt-2 does not).
#include <gtest/gtest.h>

#include <algorithm>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/test_support.h"
#include "tokenizer/chat_template.h"

namespace keel::tokenizer {
namespace {

const std::vector<ChatMessage> kConversation = {
    {"system", "Be brief.", nullptr},
    {"user", "Hi", nullptr},
    {"assistant", "Hello.", nullptr},
    {"user", "Bye", nullptr},
};

TEST(BuiltinChatTemplateTest, ChatMl) {
  auto out = ChatTemplate::chatml().render(kConversation, true, "<s>", "</s>");
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
  auto no_prompt =
      ChatTemplate::chatml().render(std::span(kConversation).subspan(1, 1), false, "", "");
  ASSERT_TRUE(no_prompt.ok());
  EXPECT_EQ(*no_prompt, "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(BuiltinChatTemplateTest, Llama2) {
  const ChatTemplate t = ChatTemplate::llama2();
  auto out = t.render(kConversation, true, "<s>", "</s>");
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out,
            "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello. </s><s>[INST] Bye "
            "[/INST]");
  auto user_only = t.render(std::span(kConversation).subspan(1, 1), true, "<s>", "</s>");
  ASSERT_TRUE(user_only.ok());
  EXPECT_EQ(*user_only, "<s>[INST] Hi [/INST]");
  // Contents are trimmed, as in Meta's format.
  std::vector<ChatMessage> spaced = {{"user", "  padded \n", nullptr}};
  auto trimmed = t.render(spaced, true, "<s>", "</s>");
  ASSERT_TRUE(trimmed.ok());
  EXPECT_EQ(*trimmed, "<s>[INST] padded [/INST]");
  std::vector<ChatMessage> bad = {{"user", "a", nullptr}, {"user", "b", nullptr}};
  auto err = t.render(bad, true, "<s>", "</s>");
  ASSERT_FALSE(err.ok());
  EXPECT_EQ(err.error().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(err.error().message().find("alternating"), std::string::npos);
}

TEST(ChatTemplateTest, ExtraFieldsAndNullContentReachTheTemplate) {
  auto t = ChatTemplate::parse(
      "{% for m in messages %}{{ m.role }}:{{ m.content is none }}:{{ m.name }};{% endfor %}"
      "{{ tools|length }}{{ enable_thinking }}");
  ASSERT_TRUE(t.ok());
  std::vector<ChatMessage> messages = {
      {"user", "x", {{"name", "bob"}}},
      {"assistant", "ignored", {{"content", nullptr}, {"role", "ignored"}}},
  };
  ChatRenderOptions options;
  options.tools = nlohmann::ordered_json::array({{{"type", "function"}}});
  options.extra_context = {{"enable_thinking", false}};
  auto out = t->render(messages, options);
  ASSERT_TRUE(out.ok()) << out.error().to_string();
  EXPECT_EQ(*out, "user:False:bob;assistant:True:;1False");
  messages[0].extra = "not an object";
  auto bad = t->render(messages, options);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("messages[0].extra"), std::string::npos);
}

TEST(ChatTemplateTest, ParseErrorsArePrefixed) {
  auto t = ChatTemplate::parse("{% for m in messages %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(t.error().message(),
            "chat template: line 1, column 1: 'for' block is never closed (expected 'endfor' or "
            "'else')");
}

TEST(ChatTemplateTest, RenderLimitsApply) {
  auto t = ChatTemplate::parse("{% for m in messages %}{{ m.content }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  std::vector<ChatMessage> messages(10, ChatMessage{"user", std::string(100, 'x'), nullptr});
  ChatRenderOptions options;
  options.limits.max_output_bytes = 500;
  auto out = t->render(messages, options);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().code(), StatusCode::kResourceExhausted);
}

// Writes a vocabulary-less GGUF holding only `template_text` (when given) and opens it.
Result<gguf::GgufFile> gguf_with_template(const std::optional<gguf::Value>& template_value) {
  gguf::GgufWriter w;
  w.set("general.architecture", gguf::Value("llama"));
  if (template_value) w.set("tokenizer.chat_template", *template_value);
  std::string path = testing::make_temp_dir("chat_template") + "/t.gguf";
  KEEL_TRY(w.write(path));
  return gguf::GgufFile::open(path, {.mode = gguf::DataMode::kNone});
}

TEST(ChatTemplateFromGgufTest, UsesTheFileTemplate) {
  auto f = gguf_with_template(gguf::Value("{{ bos_token }}{{ messages[0].content }}!"));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  ChatTemplate t = ChatTemplate::from_gguf(*f);
  EXPECT_FALSE(t.is_fallback());
  EXPECT_EQ(t.source(), "{{ bos_token }}{{ messages[0].content }}!");
  auto out = t.render(std::span(kConversation).subspan(1, 1), true, "<s>", "");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "<s>Hi!");
}

TEST(ChatTemplateFromGgufTest, FallsBackToChatMl) {
  for (const std::optional<gguf::Value>& v :
       {std::optional<gguf::Value>(), std::optional<gguf::Value>(gguf::Value("{% if %}")),
        std::optional<gguf::Value>(gguf::Value(int32_t{7}))}) {
    auto f = gguf_with_template(v);
    ASSERT_TRUE(f.ok()) << f.error().to_string();
    ChatTemplate t = ChatTemplate::from_gguf(*f);
    EXPECT_TRUE(t.is_fallback());
    auto out = t.render(std::span(kConversation).subspan(1, 1), true, "", "");
    ASSERT_TRUE(out.ok());
    EXPECT_EQ(*out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  }
}

Result<Tokenizer> load_tokenizer(const std::string& relative) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile f, gguf::GgufFile::open(testing::shared_path(relative),
                                                               {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

size_t count_of(const std::vector<TokenId>& ids, TokenId id) {
  return static_cast<size_t>(std::count(ids.begin(), ids.end(), id));
}

// A template that writes BOS itself (Llama 2) and one that does not (ChatML), tokenized the way
// the server does: prompt_for_tokenizer(), then encode(add_special=true, parse_special=true).
void check_single_bos(const Tokenizer& tok) {
  ASSERT_TRUE(tok.add_bos());
  const TokenId bos = tok.bos_id();
  const std::vector<ChatMessage> one_turn = {{"user", "Hi", nullptr}};

  auto llama2 = ChatTemplate::llama2().render(one_turn, true, bos_text(tok), eos_text(tok));
  ASSERT_TRUE(llama2.ok()) << llama2.error().to_string();
  ASSERT_EQ(*llama2, "<s>[INST] Hi [/INST]");
  EXPECT_TRUE(rendered_starts_with_bos(*llama2, tok));
  // Without the rule the prompt would start with two BOS tokens.
  std::vector<TokenId> naive = tok.encode(*llama2, true, true);
  ASSERT_GE(naive.size(), 2u);
  EXPECT_EQ(naive[0], bos);
  EXPECT_EQ(naive[1], bos);
  std::string_view prompt = prompt_for_tokenizer(*llama2, tok);
  EXPECT_EQ(prompt, "[INST] Hi [/INST]");
  std::vector<TokenId> ids = tok.encode(prompt, true, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], bos);
  EXPECT_EQ(count_of(ids, bos), 1u);
  // Same ids as tokenizing the template's own BOS without adding another.
  EXPECT_EQ(ids, tok.encode(*llama2, false, true));

  auto chatml = ChatTemplate::chatml().render(one_turn, true, bos_text(tok), eos_text(tok));
  ASSERT_TRUE(chatml.ok());
  EXPECT_FALSE(rendered_starts_with_bos(*chatml, tok));
  EXPECT_EQ(prompt_for_tokenizer(*chatml, tok), *chatml);
  std::vector<TokenId> chatml_ids = tok.encode(prompt_for_tokenizer(*chatml, tok), true, true);
  ASSERT_FALSE(chatml_ids.empty());
  EXPECT_EQ(chatml_ids[0], bos);
  EXPECT_EQ(count_of(chatml_ids, bos), 1u);
}

TEST(ChatTemplateBosTest, Stories260KGetsExactlyOneBos) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_tokenizer("models/stories260K/stories260K.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(bos_text(*tok), "<s>");
  EXPECT_EQ(eos_text(*tok), "</s>");
  check_single_bos(*tok);
}

TEST(ChatTemplateBosTest, LlamaSpmVocabGetsExactlyOneBos) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  check_single_bos(*tok);
}

TEST(ChatTemplateBosTest, TemplateBosIsKeptWhenTheTokenizerAddsNone) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_tokenizer("vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  ASSERT_FALSE(tok->add_bos());
  ASSERT_GE(tok->bos_id(), 0);
  auto t = ChatTemplate::parse("{{ bos_token }}{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  const std::vector<ChatMessage> one_turn = {{"user", "Hi", nullptr}};
  auto out = t->render(one_turn, true, bos_text(*tok), eos_text(*tok));
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(rendered_starts_with_bos(*out, *tok));
  EXPECT_EQ(prompt_for_tokenizer(*out, *tok), *out);  // unchanged: the template's BOS stays
  std::vector<TokenId> ids = tok->encode(prompt_for_tokenizer(*out, *tok), true, true);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], tok->bos_id());
  EXPECT_EQ(count_of(ids, tok->bos_id()), 1u);
}

}  // namespace
}  // namespace keel::tokenizer
