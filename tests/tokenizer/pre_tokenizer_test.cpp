// Pre-tokenizer regexes. Expectations were derived by hand from the regex definitions (leftmost
// match, alternatives tried in order, greedy quantifiers with backtracking) and, where a shared
// .out file exists, agree with the token boundaries of llama.cpp's expected ids. The .inp/.out
// pairs of llama-bpe and qwen2 have no .gguf here, so their pre-tokenizers are also checked for
// consistency with every expected tokenization: a pre-token never shares a token with another,
// so no case may have more pre-tokens than expected ids.
#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

#include <sstream>

#include "support/test_support.h"
#include "tokenizer/pre_tokenizer_spec.h"

namespace keel::tokenizer {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(PreTokenizerKind kind, std::string_view text) {
  auto pt = PreTokenizer::create(kind);
  EXPECT_TRUE(pt.ok()) << pt.error().to_string();
  if (!pt.ok()) return {};
  Pieces out;
  for (std::string_view p : pt->split(text)) out.emplace_back(p);
  return out;
}

TEST(PreTokenizerTest, EveryKnownSpecCompiles) {
  for (const PreTokenizerSpec& spec : known_pre_tokenizers()) {
    auto pt = PreTokenizer::create(spec.kind);
    EXPECT_TRUE(pt.ok()) << spec.name << ": " << pt.error().to_string();
    EXPECT_EQ(find_pre_tokenizer_spec(spec.name), &spec);
  }
  EXPECT_EQ(find_pre_tokenizer_spec("no-such-pre"), nullptr);
  auto bad = PreTokenizer::create(std::vector<std::string_view>{"(unclosed"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code(), StatusCode::kInvalidArgument);
}

TEST(PreTokenizerTest, Llama3) {
  const auto k = PreTokenizerKind::kLlama3;
  EXPECT_EQ(split(k, "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～"),
            (Pieces{"Hello", ",", " y", "'all", "!", " How", " are", " you", " 😁", " ?",
                    "我想在apple工作", "131", "415", "1", "天", "～"}));
  EXPECT_EQ(split(k, "    Hello\n    Hello"), (Pieces{"   ", " Hello", "\n", "   ", " Hello"}));
  EXPECT_EQ(split(k, "\n\n\n"), (Pieces{"\n\n\n"}));
  EXPECT_EQ(split(k, "\t\n"), (Pieces{"\t\n"}));
  EXPECT_EQ(split(k, "3333333"), (Pieces{"333", "333", "3"}));
  EXPECT_EQ(split(k, "I'm don't WE'LL"), (Pieces{"I", "'m", " don", "'t", " WE", "'LL"}));
  EXPECT_EQ(split(k, "ok?!\r\n\r\nnext"), (Pieces{"ok", "?!\r\n\r\n", "next"}));
  EXPECT_EQ(split(k, "I have 1234 apples\r\n"),
            (Pieces{"I", " have", " ", "123", "4", " apples", "\r\n"}));
  // Combining marks are not letters: a mark can only lead the next letter run (as any
  // non-letter may), so Devanagari splits around its signs.
  EXPECT_EQ(split(k, "नमस्ते"), (Pieces{"नमस", "्त", "े"}));
  EXPECT_EQ(split(k, "٣٤٥٦"), (Pieces{"٣٤٥", "٦"}));          // any Unicode digits, in threes
  EXPECT_EQ(split(k, "a\u00A0b"), (Pieces{"a", "\u00A0b"}));  // NBSP may lead a word
  EXPECT_EQ(split(k, "hi   "), (Pieces{"hi", "   "}));
  EXPECT_TRUE(split(k, "").empty());
}

TEST(PreTokenizerTest, Qwen2) {
  const auto k = PreTokenizerKind::kQwen2;
  EXPECT_EQ(split(k, "I have 1234 apples\r\n"),
            (Pieces{"I", " have", " ", "1", "2", "3", "4", " apples", "\r\n"}));
  EXPECT_EQ(
      split(k, "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～"),
      (Pieces{"Hello",           ",", " y", "'all", "!", " How", " are", " you", " 😁", " ?",
              "我想在apple工作", "1", "3",  "1",    "4", "1",    "5",    "1",    "天", "～"}));
  EXPECT_EQ(split(k, "I'm don't WE'LL"), (Pieces{"I", "'m", " don", "'t", " WE", "'LL"}));
  EXPECT_EQ(split(k, "नमस्ते"), (Pieces{"नमस", "्त", "े"}));
}

TEST(PreTokenizerTest, Qwen35KeepsMarksWithLetters) {
  EXPECT_EQ(split(PreTokenizerKind::kQwen35, "नमस्ते दुनिया"), (Pieces{"नमस्ते", " दुनिया"}));
}

TEST(PreTokenizerTest, Gpt2) {
  const auto k = PreTokenizerKind::kGpt2;
  EXPECT_EQ(split(k, "Hello world  foo\t\tbar 's"),
            (Pieces{"Hello", " world", " ", " foo", "\t", "\t", "bar", " '", "s"}));
  EXPECT_EQ(split(k, "I'm don't WE'LL"), (Pieces{"I", "'m", " don", "'t", " WE", "'", "LL"}));
  EXPECT_EQ(split(k, "ok?!\r\n\r\nnext"), (Pieces{"ok", "?!", "\r\n\r", "\n", "next"}));
  EXPECT_EQ(split(k, "3333333 x"), (Pieces{"3333333", " x"}));
}

TEST(PreTokenizerTest, DeepseekCoder) {
  EXPECT_EQ(split(PreTokenizerKind::kDeepseekCoder, "Hi, 世界 123\nok"),
            (Pieces{"Hi", ",", " ", "世界", " ", "1", "2", "3", "\n", "ok"}));
}

TEST(PreTokenizerTest, DeepseekLlm) {
  EXPECT_EQ(split(PreTokenizerKind::kDeepseekLlm, "Hi, 世界 123\nok"),
            (Pieces{"Hi", ",", " ", "世界", " ", "123", "\n", "ok"}));
  // `$` means the end of the piece only (PCRE2_DOLLAR_ENDONLY), so trailing blanks split off.
  EXPECT_EQ(split(PreTokenizerKind::kDeepseekLlm, "x 1  "), (Pieces{"x", " ", "1", "  "}));
}

TEST(PreTokenizerTest, Falcon) {
  EXPECT_EQ(split(PreTokenizerKind::kFalcon, "a+b=12345 (x)"),
            (Pieces{"a", "+", "b", "=", "123", "45", " ", "(", "x", ")"}));
}

TEST(PreTokenizerTest, DefaultWhenPreIsMissing) {
  EXPECT_EQ(split(PreTokenizerKind::kDefault, "a+b=12345 (x)`y"),
            (Pieces{"a", "+", "b", "=", "123", "45", " ", "(", "x", ")", "`", "y"}));
}

TEST(PreTokenizerTest, Starcoder) {
  EXPECT_EQ(split(PreTokenizerKind::kStarcoder, "x 2024!"),
            (Pieces{"x", " ", "2", "0", "2", "4", "!"}));
}

TEST(PreTokenizerTest, PiecesAlwaysConcatenateToTheInput) {
  const std::string text =
      "Mixed: ÄÖÜ äöü ß, 日本語テキスト, Ελληνικά, עברית, \t tabs\r\n\r\n "
      "🦙🦙 "
      "1,234.5e-6 "
      "~`|^";
  for (const PreTokenizerSpec& spec : known_pre_tokenizers()) {
    std::string joined;
    for (const auto& p : split(spec.kind, text)) {
      EXPECT_FALSE(p.empty()) << spec.name;
      joined += p;
    }
    EXPECT_EQ(joined, text) << spec.name;
  }
}

TEST(PreTokenizerTest, EmptyMatchesDoNotLoopOrDropText) {
  auto pt = PreTokenizer::create(std::vector<std::string_view>{"b*"});
  ASSERT_TRUE(pt.ok()) << pt.error().to_string();
  const auto pieces = pt->split("abba");
  EXPECT_EQ((Pieces(pieces.begin(), pieces.end())), (Pieces{"a", "bb", "a"}));
}

// Consistency with llama.cpp's expected ids for the vocabularies that have no .gguf here.
void check_piece_counts(const std::string& vocab, PreTokenizerKind kind) {
  KEEL_REQUIRE_SHARED();
  const std::string base = keel::testing::shared_path("vocab/ggml-vocab-" + vocab + ".gguf");
  const std::string raw = keel::testing::read_file(base + ".inp");
  std::istringstream out(keel::testing::read_file(base + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  int checked = 0;
  for (std::string line; pos < raw.size() && std::getline(out, line); ++checked) {
    size_t next = raw.find(sep, pos);
    if (next == std::string::npos) next = raw.size();
    const std::string text = raw.substr(pos, next - pos);
    pos = next + sep.size();
    std::istringstream ids(line);
    size_t num_ids = 0;
    for (int id; ids >> id;) ++num_ids;
    EXPECT_LE(split(kind, text).size(), num_ids) << vocab << " case #" << checked;
  }
  EXPECT_EQ(checked, 46) << vocab;
}

TEST(PreTokenizerTest, Llama3AgreesWithLlamaBpeExpectedIds) {
  check_piece_counts("llama-bpe", PreTokenizerKind::kLlama3);
}

TEST(PreTokenizerTest, Qwen2AgreesWithQwen2ExpectedIds) {
  check_piece_counts("qwen2", PreTokenizerKind::kQwen2);
}

}  // namespace
}  // namespace keel::tokenizer
