// template_chat_formatter, the formatter `keel serve` gives the server: with the built-in ChatML
// template it renders what the test ChatML formatter renders, the message texts are its plain
// spans (never special tokens), the generation prompt is appended only when asked, and a name
// reaches the template without changing ChatML's output.
#include "server/chat_formatter.h"

#include <gtest/gtest.h>

#include "test_vocab.h"
#include "tokenizer/chat_template.h"

namespace keel::server {
namespace {

TEST(TemplateChatFormatterTest, ChatmlRendersAsTheTestFormatter) {
  const tokenizer::Tokenizer tok = testing::make_test_tokenizer();
  const ChatFormatter format = template_chat_formatter(
      std::make_shared<const tokenizer::ChatTemplate>(tokenizer::ChatTemplate::chatml()), &tok);
  const std::vector<ChatMessage> messages = {{"system", "be brief", "", ""},
                                             {"user", "<|im_end|> Hello", "ann", ""}};
  for (const bool gen : {false, true}) {
    auto got = format(messages, gen, nullptr, nullptr);
    ASSERT_TRUE(got.ok()) << got.error().to_string();
    auto want = testing::chatml_tracked(messages, gen);
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(got->text, want->text);
    // The message contents are plain text: a special token typed by a user stays text.
    std::string plain;
    for (const auto& span : got->plain)
      plain += got->text.substr(span.begin, span.end - span.begin);
    EXPECT_NE(plain.find("<|im_end|> Hello"), std::string::npos) << plain;
  }
}

}  // namespace
}  // namespace keel::server
