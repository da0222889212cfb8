// The merge algorithms on synthetic vocabularies whose every token, score and merge the test
// controls: SPM merges by score (ties leftmost) with byte fallback; BPE merges by rank (ties
// leftmost), ignore_merges, and the GPT-2 byte alphabet in decoding.
#include <gtest/gtest.h>

#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {
namespace {

const std::string kSp = "\xE2\x96\x81";  // "▁"

TEST(SpmEncoderTest, MergesHighestScoreFirstAndLeftmostOnTies) {
  auto v = testing::spm_base();
  const TokenId sp = v.add(kSp, testing::kNormal, -10);
  const TokenId a = v.add("a", testing::kNormal, -10);
  const TokenId b = v.add("b", testing::kNormal, -10);
  const TokenId ab = v.add("ab", testing::kNormal, -1);
  const TokenId sp_a = v.add(kSp + "a", testing::kNormal, -2);
  const TokenId aa = v.add("aa", testing::kNormal, -3);
  auto tok = testing::load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  // "▁ab": "ab" (-1) beats "▁a" (-2).
  EXPECT_EQ(tok->encode("ab", false, false), (std::vector<TokenId>{sp, ab}));
  // "▁aab": "ab" first, then "▁a"; "aa" (-3) never gets its chance.
  EXPECT_EQ(tok->encode("aab", false, false), (std::vector<TokenId>{sp_a, ab}));
  // "▁b▁aaa": "▁a" (-2) beats "aa" (-3), which then takes the last two.
  EXPECT_EQ(tok->encode("b aaa", false, false), (std::vector<TokenId>{sp, b, sp_a, aa}));
  // "▁baaa": two "aa" candidates of equal score; the leftmost merges first.
  EXPECT_EQ(tok->encode("baaa", false, false), (std::vector<TokenId>{sp, b, aa, a}));
  EXPECT_EQ(tok->decode(tok->encode("b aaa", false, false), false), "b aaa");
}

TEST(SpmEncoderTest, UnknownCharactersFallBackToBytesOrUnk) {
  auto v = testing::spm_base();
  const TokenId sp = v.add(kSp);
  auto tok = testing::load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const TokenId c3 = tok->find_token("<0xC3>");
  const TokenId a9 = tok->find_token("<0xA9>");
  EXPECT_EQ(tok->encode("é", false, false), (std::vector<TokenId>{sp, c3, a9}));
  EXPECT_EQ(tok->decode(tok->encode("é", false, false), false), "é");
  // Invalid UTF-8 goes through byte fallback too (and decodes to U+FFFD).
  const auto bad = tok->encode("\xFF", false, false);
  EXPECT_EQ(bad, (std::vector<TokenId>{sp, tok->find_token("<0xFF>")}));
  EXPECT_EQ(tok->decode(bad, false), "\xEF\xBF\xBD");

  // Without byte tokens, <unk> stands in.
  testing::SyntheticVocab no_bytes;
  no_bytes.add("<unk>", testing::kUnknownType);
  no_bytes.add("<s>", testing::kControl);
  no_bytes.add("</s>", testing::kControl);
  const TokenId sp2 = no_bytes.add(kSp);
  auto tok2 = testing::load_tokenizer(no_bytes);
  ASSERT_TRUE(tok2.ok()) << tok2.error().to_string();
  EXPECT_EQ(tok2->encode("é", false, false), (std::vector<TokenId>{sp2, 0, 0}));
}

// A byte-level vocabulary (ids 0..255 = bytes) plus a few merged tokens.
struct BpeFixture {
  testing::SyntheticVocab v;
  TokenId aa = 0, bc = 0, abc = 0, hello = 0;
};

BpeFixture bpe_fixture(const std::string& pre) {
  BpeFixture f;
  f.v = testing::bpe_base(pre);
  const auto add = [&](const std::string& t) {
    f.v.tokens.push_back(t);
    f.v.types.push_back(testing::kNormal);
    return static_cast<TokenId>(f.v.tokens.size() - 1);
  };
  f.aa = add("aa");
  f.bc = add("bc");
  f.abc = add("abc");
  f.hello = add("hello");  // no merges lead to it
  f.v.merges = {"b c", "a a", "a bc"};
  return f;
}

TEST(BpeEncoderTest, MergesLowestRankFirstAndLeftmostOnTies) {
  auto f = bpe_fixture("gpt-2");
  auto tok = testing::load_tokenizer(f.v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const TokenId a = 'a';
  EXPECT_EQ(tok->encode("abc", false, false), std::vector<TokenId>{f.abc});
  EXPECT_EQ(tok->encode("aaa", false, false), (std::vector<TokenId>{f.aa, a}));
  // "aabc": "b c" (rank 0) before "a a" (rank 1), then "a bc" (rank 2) is no longer adjacent
  // to a lone "a".
  EXPECT_EQ(tok->encode("aabc", false, false), (std::vector<TokenId>{f.aa, f.bc}));
  EXPECT_EQ(tok->encode("hello", false, false), (std::vector<TokenId>{'h', 'e', 'l', 'l', 'o'}));
  // A space is the byte-level "Ġ" (id 32 here), its own pre-token piece prefix.
  EXPECT_EQ(tok->encode("a abc", false, false), (std::vector<TokenId>{a, ' ', f.abc}));
}

TEST(BpeEncoderTest, IgnoreMergesEmitsWholeWordTokens) {
  auto f = bpe_fixture("llama-bpe");
  auto tok = testing::load_tokenizer(f.v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->encode("hello", false, false), std::vector<TokenId>{f.hello});
  EXPECT_EQ(tok->encode("aabc", false, false), (std::vector<TokenId>{f.aa, f.bc}));
}

TEST(BpeEncoderTest, DecodesTheByteAlphabet) {
  auto f = bpe_fixture("gpt-2");
  f.v.tokens.push_back("\xE2\x82\xAC");  // "€" is not in the byte alphabet
  f.v.types.push_back(testing::kNormal);
  const TokenId euro = static_cast<TokenId>(f.v.tokens.size() - 1);
  auto tok = testing::load_tokenizer(f.v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->token_to_piece(' ', false), " ");    // "Ġ"
  EXPECT_EQ(tok->token_to_piece('\n', false), "\n");  // "Ċ"
  EXPECT_EQ(tok->token_to_piece(0xE9, false), "\xE9");
  // llama.cpp renders code points outside the alphabet this way.
  EXPECT_EQ(tok->token_to_piece(euro, false), "[UNK_BYTE_0xe282ac\xE2\x82\xAC]");
  const std::string text = "Grüße\n\t🦙 x";
  EXPECT_EQ(tok->decode(tok->encode(text, false, false), false), text);
}

}  // namespace
}  // namespace keel::tokenizer
