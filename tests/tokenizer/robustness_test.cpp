// Robustness on real vocabularies: arbitrary bytes (invalid UTF-8 included) encode without
// failing, to ids in range, and decode to valid UTF-8; BPE rewrites each invalid byte to U+FFFD
// before tokenizing (as llama.cpp does) and SPM round-trips valid text exactly. A 100 KB mixed
// text round-trips.
#include <gtest/gtest.h>

#include <random>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/space_cleaner.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace keel::tokenizer {
namespace {

Result<Tokenizer> load(const std::string& name) {
  KEEL_ASSIGN_OR_RETURN(
      gguf::GgufFile f,
      gguf::GgufFile::open(keel::testing::shared_path("vocab/ggml-vocab-" + name + ".gguf"),
                           {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

// Random text from pieces that stress UTF-8 handling and special tokens. `with_spm_space` adds
// U+2581, which SPM cannot tell from a space (see SpmReadsU2581AsASpace).
std::string random_bytes(std::mt19937* rng, size_t n, bool with_spm_space) {
  const std::string pieces[] = {
      "a",    " ",    "\n", "é",        "日", "🦙", "\xC3",          "\xA9",
      "\xFF", "\x80", "'",  "\xF0\x9F", ",",  "<s>",  "<|endoftext|>", "\xE2\x96\x81"};
  const size_t num_pieces = std::size(pieces) - (with_spm_space ? 0 : 1);
  std::string s;
  while (s.size() < n) s += pieces[(*rng)() % num_pieces];
  return s;
}

class RobustnessTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RobustnessTest, ArbitraryBytesEncodeAndDecodeAsDocumented) {
  KEEL_REQUIRE_SHARED();
  auto tok = load(GetParam());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  std::mt19937 rng(99);
  for (int iter = 0; iter < 200; ++iter) {
    const std::string bytes = random_bytes(&rng, rng() % 64, tok->type() == VocabType::kBpe);
    for (bool parse_special : {false, true}) {
      const auto ids = tok->encode(bytes, true, parse_special);
      for (TokenId id : ids) ASSERT_TRUE(id >= 0 && id < tok->vocab_size());
      EXPECT_TRUE(is_valid_utf8(tok->decode(ids, true)));
    }
    const auto ids = tok->encode(bytes, false, false);
    const std::string decoded = tok->decode(ids, false);
    if (tok->type() == VocabType::kBpe) {
      const std::string normalized = normalize_utf8_lenient(bytes);
      EXPECT_EQ(decoded, tok->clean_spaces() ? clean_spaces_batch(normalized) : normalized)
          << "iteration " << iter;
    } else if (is_valid_utf8(bytes)) {
      EXPECT_EQ(decoded, bytes) << "iteration " << iter;
    }
    // SPM with invalid UTF-8: a stray lead byte swallows the next bytes, which may be part of an
    // escaped space (U+2581), exactly as in llama.cpp; only validity is asserted above.
  }
}

TEST_P(RobustnessTest, LongMixedTextRoundTrips) {
  KEEL_REQUIRE_SHARED();
  auto tok = load(GetParam());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  std::mt19937 rng(5);
  const char* words[] = {"the ",        "quick ",   "brown ",  "fox ",      "jumps, ",
                         "over 12345 ", "ünïcödé ", "日本語 ", "🦙🚀 ", "\n\n",
                         "    ",        "don't ",   "x=y+z; "};
  std::string text;
  while (text.size() < 100000) text += words[rng() % std::size(words)];
  const auto ids = tok->encode(text, false, false);
  EXPECT_GT(ids.size(), text.size() / 10);
  EXPECT_EQ(tok->decode(ids, false), tok->clean_spaces() ? clean_spaces_batch(text) : text);
}

// Tokenizer::min_tokens is a lower bound of the real count for any valid UTF-8 text: random
// mixes, long runs of one character or of spaces (which long vocabulary pieces cover), special
// tokens with and without parsing; and it grows with the text (an 8 MB prompt is refused before
// it is tokenized).
void check_min_tokens(const std::string& name) {
  auto tok = load(name);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  if (tok->max_token_bytes() == 0) {
    // Some byte has no token at all (mpt's vocabulary lacks byte-level characters, and BPE's
    // fallback drops such bytes): no bound is sound, so none is claimed.
    EXPECT_EQ(name, "mpt");
    EXPECT_EQ(tok->min_tokens(std::string(100000, 'x')), 0u);
    return;
  }
  std::mt19937 rng(17);
  std::vector<std::string> texts;
  for (int i = 0; i < 60; ++i) {
    std::string t = random_bytes(&rng, rng() % 400, false);
    if (is_valid_utf8(t)) texts.push_back(std::move(t));
  }
  for (const char* unit : {" ", "a", "\n", "=", "ab", "日", "<s>", "<|endoftext|>", "\t "}) {
    std::string t;
    while (t.size() < 3000) t += unit;
    texts.push_back(std::move(t));
  }
  for (const std::string& t : texts) {
    const size_t bound = tok->min_tokens(t);
    for (bool parse_special : {false, true}) {
      EXPECT_LE(bound, tok->encode(t, false, parse_special).size())
          << name << ": " << t.substr(0, 40);
    }
  }
  EXPECT_GT(tok->min_tokens(std::string(size_t{8} << 20, 'x')), size_t{8} << 20 >> 10);
}

TEST_P(RobustnessTest, MinTokensNeverExceedsTheRealCount) {
  KEEL_REQUIRE_SHARED();
  check_min_tokens(GetParam());
}

// Phi-3's special tokens swallow the whitespace after them: only other bytes count there.
TEST(RobustnessSpmTest, MinTokensWithWhitespaceSwallowingSpecials) {
  KEEL_REQUIRE_SHARED();
  check_min_tokens("phi-3");
}

// SentencePiece stores spaces as U+2581, so a literal U+2581 in the input encodes like a space
// and decodes as one (llama.cpp behaves the same).
TEST(RobustnessSpmTest, SpmReadsU2581AsASpace) {
  KEEL_REQUIRE_SHARED();
  auto tok = load("llama-spm");
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->encode("a\xE2\x96\x81"
                        "b",
                        false, false),
            tok->encode("a b", false, false));
  EXPECT_EQ(tok->decode(tok->encode("a\xE2\x96\x81"
                                    "b",
                                    false, false),
                        false),
            "a b");
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, RobustnessTest,
                         ::testing::Values("llama-spm", "gpt-2", "deepseek-coder", "mpt"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

}  // namespace
}  // namespace keel::tokenizer
