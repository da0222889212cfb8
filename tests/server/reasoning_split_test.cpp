// The reasoning parser without a server (reasoning_split.h): the split of whole outputs, the same
// split for every chunking of them (a tag split across tokens or arriving inside one), the
// generation prompt's <think> state, where each parser starts, and the tool grammars that let
// the thinking come first (tool_grammar.h's with_reasoning_prefix).
#include <gtest/gtest.h>

#include <random>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "server/reasoning_split.h"
#include "server/tool_call_parser.h"
#include "server/tool_grammar.h"

namespace keel::server {
namespace {

struct Case {
  const char* text;
  bool in_reasoning;
  const char* reasoning;
  const char* content;
};

const Case kCases[] = {
    // Content first: only a leading <think> opens the thinking.
    {"<think>\nI should greet.\n</think>\n\nHello!", false, "I should greet.", "Hello!"},
    {"  \n<think>a</think>b", false, "a", "b"},
    {"Plain answer, a <think> later </think> is text.", false, "",
     "Plain answer, a <think> later </think> is text."},
    {"  spaces kept\n", false, "", "  spaces kept\n"},
    {"<thin", false, "", "<thin"},
    {"<think>never closed\n\n", false, "never closed", ""},
    {"<think></think>\n\n", false, "", ""},
    {"", false, "", ""},
    // Thinking first (the prompt opened <think>, or DeepSeek-R1).
    {"\nthinking...\n</think>\n\nAnswer", true, "thinking...", "Answer"},
    {"<think>\nself-opened</think>x", true, "self-opened", "x"},
    {"a</think>b</think>c<think>d", true, "a", "b</think>c<think>d"},
    {"only thinking, cut by max_tokens  ", true, "only thinking, cut by max_tokens", ""},
    {"two\n\nparagraphs\n</think>", true, "two\n\nparagraphs", ""},
    {"</think>", true, "", ""},
    {"<think", true, "<think", ""},
    {"x </thi", true, "x </thi", ""},
};

TEST(ReasoningSplitTest, WholeOutputs) {
  for (const Case& c : kCases) {
    const ReasoningParts p = split_reasoning(c.text, c.in_reasoning);
    EXPECT_EQ(p.reasoning, c.reasoning) << "'" << c.text << "'";
    EXPECT_EQ(p.content, c.content) << "'" << c.text << "'";
  }
}

ReasoningParts split_in_chunks(std::string_view text, bool in_reasoning,
                               const std::vector<size_t>& cuts) {
  ReasoningSplitter s(in_reasoning);
  ReasoningParts all;
  size_t from = 0;
  for (size_t cut : cuts) {
    ReasoningParts p = s.push(text.substr(from, cut - from));
    all.reasoning += p.reasoning;
    all.content += p.content;
    from = cut;
  }
  ReasoningParts p = s.push(text.substr(from));
  all.reasoning += p.reasoning;
  all.content += p.content;
  p = s.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}

TEST(ReasoningSplitTest, EveryChunkingGivesTheWholeSplit) {
  std::mt19937 rng(7);
  for (const Case& c : kCases) {
    const std::string_view text = c.text;
    for (size_t a = 0; a <= text.size(); ++a) {  // every single cut
      const ReasoningParts p = split_in_chunks(text, c.in_reasoning, {a});
      EXPECT_EQ(p.reasoning, c.reasoning) << "'" << text << "' cut at " << a;
      EXPECT_EQ(p.content, c.content) << "'" << text << "' cut at " << a;
    }
    std::vector<size_t> bytes;  // one byte at a time
    for (size_t i = 1; i < text.size(); ++i) bytes.push_back(i);
    const ReasoningParts b = split_in_chunks(text, c.in_reasoning, bytes);
    EXPECT_EQ(b.reasoning, c.reasoning) << "'" << text << "' byte by byte";
    EXPECT_EQ(b.content, c.content) << "'" << text << "' byte by byte";
    for (int trial = 0; trial < 20 && !text.empty(); ++trial) {  // random chunkings
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i) {
        if (rng() % 3 == 0) cuts.push_back(i);
      }
      const ReasoningParts r = split_in_chunks(text, c.in_reasoning, cuts);
      EXPECT_EQ(r.reasoning, c.reasoning) << "'" << text << "'";
      EXPECT_EQ(r.content, c.content) << "'" << text << "'";
    }
  }
}

TEST(ReasoningSplitTest, StreamsAsSoonAsDecided) {
  ReasoningSplitter s(/*in_reasoning=*/false);
  EXPECT_EQ(s.push("<th").content, "");  // may be <think>: held
  ReasoningParts p = s.push("ink>Let me");
  EXPECT_EQ(p.reasoning, "Let me");
  p = s.push(" think </");  // the space and a possible </think> are held
  EXPECT_EQ(p.reasoning, " think");
  p = s.push("b> more");  // not the tag after all
  EXPECT_EQ(p.reasoning, " </b> more");
  p = s.push("</think>\n\n");
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, "");
  p = s.push("Answer");
  EXPECT_EQ(p.content, "Answer");
  ReasoningSplitter plain(false);
  EXPECT_EQ(plain.push("Hi").content, "Hi");  // no tag: content at once
}

TEST(ReasoningSplitTest, ThinkTailOfTheGenerationPrompt) {
  auto tracked = [](std::string text, size_t plain_begin, size_t plain_end) {
    tokenizer::TrackedText t{std::move(text), {}};
    if (plain_end > plain_begin) t.plain.push_back({plain_begin, plain_end});
    return t;
  };
  // "<|im_start|>user\n" is 17 bytes; the user's text "Q <think>" is plain.
  const std::string head = "<|im_start|>user\nQ <think><|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(think_tail(tracked(head, 17, 26)), ThinkTail::kNone);
  EXPECT_EQ(think_tail(tracked(head + "<think>\n", 17, 26)), ThinkTail::kOpen);
  EXPECT_EQ(think_tail(tracked(head + "<think>\n\n</think>\n\n", 17, 26)), ThinkTail::kClosed);
  EXPECT_EQ(think_tail(tracked("<think>", 0, 0)), ThinkTail::kOpen);
  // A user's own "<think>" at the end of its text is not the template's.
  EXPECT_EQ(think_tail(tracked("Q <think>", 0, 9)), ThinkTail::kNone);
}

TEST(ReasoningSplitTest, WhereEachParserStarts) {
  EXPECT_FALSE(starts_in_reasoning(ReasoningParser::kNone, ThinkTail::kOpen));
  EXPECT_FALSE(starts_in_reasoning(ReasoningParser::kQwen3, ThinkTail::kNone));
  EXPECT_TRUE(starts_in_reasoning(ReasoningParser::kQwen3, ThinkTail::kOpen));
  EXPECT_FALSE(starts_in_reasoning(ReasoningParser::kQwen3, ThinkTail::kClosed));
  EXPECT_TRUE(starts_in_reasoning(ReasoningParser::kDeepSeekR1, ThinkTail::kNone));
  EXPECT_TRUE(starts_in_reasoning(ReasoningParser::kDeepSeekR1, ThinkTail::kOpen));
  EXPECT_FALSE(starts_in_reasoning(ReasoningParser::kDeepSeekR1, ThinkTail::kClosed));
  for (std::string_view name : {"none", "qwen3", "deepseek-r1"}) {
    Result<ReasoningParser> p = parse_reasoning_parser(name);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(reasoning_parser_name(*p), name);
  }
  EXPECT_EQ(parse_reasoning_parser("deepseek_r1").status().message(),
            "reasoning parser \"deepseek_r1\": expected none, qwen3 or deepseek-r1");
}

bool reasoning_grammar_accepts(const std::string& gbnf, std::string_view text) {
  Result<grammar::Grammar> g = grammar::parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.error().to_string() << "\n" << gbnf;
  if (!g.ok()) return false;
  grammar::StackSet state = grammar::initial_state(*g);
  return grammar::advance(*g, text, &state) && state.has_complete();
}

ToolRequest add_request(ToolChoice choice) {
  ToolRequest r;
  r.tools.push_back(ToolDef{.name = "add",
                            .description = "",
                            .parameters = Json::parse(R"({"type": "object", "properties":
                                {"a": {"type": "integer"}}, "required": ["a"]})"),
                            .definition = nullptr});
  r.choice = choice;
  return r;
}

TEST(ReasoningSplitTest, ToolGrammarsLetTheThinkingComeFirst) {
  const std::string call = R"({"name": "add", "arguments": {"a": 1}})";
  Result<std::string> forced =
      forced_tool_grammar(ToolFamily::kGeneric, add_request(ToolChoice::kRequired));
  ASSERT_TRUE(forced.ok()) << forced.error().to_string();
  ASSERT_FALSE(reasoning_grammar_accepts(*forced, "<think>x</think>" + call));  // the plain grammar
  const std::string optional = with_reasoning_prefix(*forced, /*in_reasoning=*/false);
  EXPECT_TRUE(reasoning_grammar_accepts(optional, call));
  EXPECT_TRUE(reasoning_grammar_accepts(optional, "<think>add 1 </ th</think>\n\n" + call));
  EXPECT_FALSE(reasoning_grammar_accepts(optional, "<think>a</think>b</think>" + call));
  EXPECT_FALSE(reasoning_grammar_accepts(optional, "<think>x</think>not a call"));
  const std::string required = with_reasoning_prefix(*forced, /*in_reasoning=*/true);
  EXPECT_TRUE(reasoning_grammar_accepts(required, "Thinking.</think>\n" + call));
  EXPECT_TRUE(reasoning_grammar_accepts(required, "</think>" + call));
  EXPECT_FALSE(
      reasoning_grammar_accepts(required, call));  // the prompt opened the thinking: close it
  // The content after the thinking parses into the call.
  const ReasoningParts parts = split_reasoning("Thinking.</think>\n" + call, true);
  EXPECT_EQ(
      parse_tool_output(ToolFamily::kGeneric, parts.content, add_request(ToolChoice::kRequired))
          .calls.size(),
      1u);
  Result<std::string> hermes =
      auto_tool_grammar(ToolFamily::kHermes, add_request(ToolChoice::kAuto));
  ASSERT_TRUE(hermes.ok());
  const std::string h = with_reasoning_prefix(*hermes, false);
  EXPECT_TRUE(reasoning_grammar_accepts(
      h, "<think>hm</think>Sure.<tool_call>\n" + call + "\n</tool_call>"));
  EXPECT_TRUE(reasoning_grammar_accepts(h, "No call."));
  EXPECT_FALSE(reasoning_grammar_accepts(h, "<think>hm</think><tool_call>\nnope\n</tool_call>"));
}

}  // namespace
}  // namespace keel::server
