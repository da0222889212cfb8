// Chat JSONL data (chat_data.h) on stories260K's vocabulary and the ChatML fallback template:
// the loss mask covers exactly the assistant turns of weight 1 (their text through the end of
// turn), weight 0 turns and the other roles stay out, array content and tool calls are accepted,
// truncation to the context, and every malformed line is refused with its line number.
#include "train/chat_data.h"

#include <gtest/gtest.h>

#include "model/model.h"
#include "train_test_util.h"

namespace keel::train::testing {
namespace {

class ChatDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = model::Model::open(stories_path());
    ASSERT_TRUE(m.ok());
    auto tok = tokenizer::Tokenizer::from_gguf((*m)->file());
    ASSERT_TRUE(tok.ok());
    tok_ = std::make_unique<tokenizer::Tokenizer>(*tok);
  }
  Result<ChatDataset> parse(std::string_view jsonl, int64_t max_tokens = 512) {
    return parse_chat_jsonl(jsonl, tmpl_, *tok_, ChatDataOptions{max_tokens});
  }
  std::string turn_text(const ChatExample& ex, size_t i) {
    const TurnSpan& t = ex.turns[i];
    const std::vector<int32_t> ids(ex.seq.tokens.begin() + t.begin, ex.seq.tokens.begin() + t.end);
    return tok_->decode(ids, true);
  }

  tokenizer::ChatTemplate tmpl_ = tokenizer::ChatTemplate::chatml();
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(ChatDataTest, MasksTheAssistantTurnsOfWeightOne) {
  auto d = parse(
      R"({"messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"}, )"
      R"({"role": "assistant", "content": "Hello there."}, {"role": "user", "content": "More"}, )"
      R"({"role": "assistant", "content": "No more.", "weight": 0}, )"
      R"({"role": "user", "content": [{"type": "text", "text": "Last"}]}, )"
      R"({"role": "assistant", "content": "The end.", "weight": 1}]})"
      "\n");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->examples.size(), 1u);
  const ChatExample& ex = d->examples[0];
  EXPECT_EQ(ex.line, 1);
  ASSERT_EQ(ex.turns.size(), 2u);
  EXPECT_EQ(turn_text(ex, 0), "Hello there.<|im_end|>\n");
  EXPECT_EQ(turn_text(ex, 1), "The end.<|im_end|>\n");
  int64_t in_turns = 0;
  for (const TurnSpan& t : ex.turns) in_turns += t.end - t.begin;
  EXPECT_EQ(ex.seq.num_targets(), in_turns);
  EXPECT_EQ(d->num_targets, in_turns);
  EXPECT_EQ(ex.seq.tokens.front(), tok_->bos_id());
  // The tokens before the first turn are the prompt a server would send for it.
  const std::vector<int32_t> prompt(ex.seq.tokens.begin(),
                                    ex.seq.tokens.begin() + ex.turns[0].begin);
  EXPECT_EQ(tok_->decode(prompt, true).find("<|im_start|>assistant\n"),
            tok_->decode(prompt, true).size() - std::string("<|im_start|>assistant\n").size());
}

TEST_F(ChatDataTest, AcceptsToolsAndToolCalls) {
  auto d = parse(
      R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}], )"
      R"("messages": [{"role": "user", "content": "call f"}, {"role": "assistant", "content": null, )"
      R"("tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}], "weight": 0}, )"
      R"({"role": "tool", "tool_call_id": "c1", "content": "42"}, {"role": "assistant", "content": "It is 42."}]})");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->examples[0].turns.size(), 1u);
  EXPECT_EQ(turn_text(d->examples[0], 0), "It is 42.<|im_end|>\n");
}

TEST_F(ChatDataTest, TruncatesToTheContext) {
  auto d = parse(
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there, how are you today?"}]})",
      44);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->examples[0].seq.tokens.size(), 44u);
  EXPECT_TRUE(d->examples[0].truncated);
  EXPECT_EQ(d->num_truncated, 1);
  ASSERT_EQ(d->examples[0].turns.size(), 1u);
  EXPECT_LT(d->examples[0].turns[0].begin, 44);
  EXPECT_EQ(d->examples[0].turns[0].end, 44);
}

TEST_F(ChatDataTest, ErrorsNameTheLine) {
  const std::string ok =
      R"({"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]})";
  const struct {
    std::string line;
    std::string says;
  } cases[] = {
      {"{not json", "not valid JSON"},
      {R"([1, 2])", "not a JSON object"},
      {R"({"messages": []})", "'messages' must be a non-empty array"},
      {R"({"messages": [{"content": "x"}]})", "messages[0] needs a string 'role'"},
      {R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content must be"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 2}]})",
       "messages[1].weight must be 0 or 1"},
      {R"({"messages": [{"role": "user", "content": "a", "weight": 1}]})",
       "weight is allowed on assistant messages only"},
      {R"({"messages": [{"role": "user", "content": "a"}]})", "no assistant message to train on"},
      {R"({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b", "weight": 0}]})",
       "no assistant message to train on"},
      {R"({"tools": {}, "messages": [{"role": "assistant", "content": "b"}]})",
       "'tools' must be an array"},
  };
  for (const auto& c : cases) {
    auto d = parse(ok + "\n\n" + c.line + "\n" + ok + "\n");
    ASSERT_FALSE(d.ok()) << c.line;
    EXPECT_EQ(d.status().message().rfind("line 3: ", 0), 0u) << d.status().message();
    EXPECT_NE(d.status().message().find(c.says), std::string::npos) << d.status().message();
  }
  EXPECT_FALSE(parse("\n  \n").ok());
  auto two = parse(ok + "\n" + ok);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->examples[1].line, 2);
}

}  // namespace
}  // namespace keel::train::testing
