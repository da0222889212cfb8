// Special tokens: partitioning like llama.cpp's tokenizer_st_partition (longest text first,
// control tokens only with parse_special, user-defined tokens always, lstrip/rstrip), EOG and
// control detection by token text, and rendering; control tokens are text inside plain spans
// (what a user wrote).
#include <gtest/gtest.h>

#include <algorithm>

#include "synthetic_vocab.h"
#include "tokenizer/special_partition.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {
namespace {

using testing::kControl;
using testing::kNormal;
using testing::kUserDefined;

struct Ids {
  TokenId im_start, im_end, eot, tool, tool_call, bcd, ab, endoftext, unused, channel;
};

testing::SyntheticVocab special_vocab(Ids* ids) {
  auto v = testing::spm_base();
  v.add("\xE2\x96\x81");  // "▁"
  ids->im_start = v.add("<|im_start|>", kControl);
  ids->im_end = v.add("<|im_end|>", kNormal);  // promoted to control: it looks like an EOG token
  ids->eot = v.add("<|eot_id|>", kControl);
  ids->tool = v.add("<tool>", kUserDefined);
  ids->tool_call = v.add("<tool_call>", kUserDefined);
  ids->bcd = v.add("bcd", kUserDefined);
  ids->ab = v.add("ab", kUserDefined);
  ids->endoftext = v.add("<|endoftext|>", kControl);
  ids->unused = v.add("<unused7>", kControl);
  ids->channel = v.add("<|channel|>", kControl);
  return v;
}

// A fragment list written compactly: a token id, or the raw text it covers.
std::vector<std::string> describe(const std::vector<Fragment>& fragments, std::string_view text) {
  std::vector<std::string> out;
  for (const Fragment& f : fragments) {
    out.push_back(f.token == kNoToken ? "'" + std::string(text.substr(f.offset, f.length)) + "'"
                                      : "#" + std::to_string(f.token));
  }
  return out;
}

class SpecialTokensTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = testing::load_tokenizer(special_vocab(&ids_));
    ASSERT_TRUE(tok.ok()) << tok.error().to_string();
    tok_ = std::make_unique<Tokenizer>(*tok);
    matcher_ = SpecialTokenMatcher(tok_->vocab());
  }
  std::vector<std::string> parts(std::string_view text, bool parse_special) const {
    return describe(matcher_.partition(tok_->vocab(), text, parse_special), text);
  }
  std::string id(TokenId t) const { return "#" + std::to_string(t); }

  Ids ids_{};
  std::unique_ptr<Tokenizer> tok_;
  SpecialTokenMatcher matcher_;
};

TEST_F(SpecialTokensTest, ControlTokensNeedParseSpecialUserDefinedDoNot) {
  const std::string text = "x<tool>y<|im_end|>z";
  EXPECT_EQ(parts(text, false), (std::vector<std::string>{"'x'", id(ids_.tool), "'y<|im_end|>z'"}));
  EXPECT_EQ(parts(text, true),
            (std::vector<std::string>{"'x'", id(ids_.tool), "'y'", id(ids_.im_end), "'z'"}));
}

TEST_F(SpecialTokensTest, NoSpecialTokensGivesOneFragmentAndEmptyGivesNone) {
  EXPECT_EQ(parts("plain text < | >", true), (std::vector<std::string>{"'plain text < | >'"}));
  EXPECT_TRUE(parts("", true).empty());
}

TEST_F(SpecialTokensTest, LongerTokensClaimTheirTextFirst) {
  EXPECT_EQ(parts("<tool_call><tool><tool_call>", false),
            (std::vector<std::string>{id(ids_.tool_call), id(ids_.tool), id(ids_.tool_call)}));
  // Longest first over the whole text, not leftmost: "bcd" wins inside "abcd" although "ab"
  // starts earlier (llama.cpp's order); "ab" then matches where it is left alone.
  EXPECT_EQ(parts("abcd ab", false),
            (std::vector<std::string>{"'a'", id(ids_.bcd), "' '", id(ids_.ab)}));
}

TEST_F(SpecialTokensTest, AdjacentAndRepeatedTokens) {
  EXPECT_EQ(
      parts("<|im_start|><|im_start|>a<|im_start|>", true),
      (std::vector<std::string>{id(ids_.im_start), id(ids_.im_start), "'a'", id(ids_.im_start)}));
}

TEST_F(SpecialTokensTest, EogAndControlDetectedByText) {
  EXPECT_TRUE(tok_->is_eog(ids_.im_end));
  EXPECT_TRUE(tok_->is_eog(ids_.eot));
  EXPECT_TRUE(tok_->is_eog(ids_.endoftext));
  EXPECT_TRUE(tok_->is_eog(2));  // </s>, the EOS
  EXPECT_FALSE(tok_->is_eog(ids_.im_start));
  EXPECT_FALSE(tok_->is_eog(1));
  EXPECT_TRUE(tok_->is_control(ids_.im_end));  // declared normal, promoted
  // Several EOT-looking tokens: the lowest id becomes eot_id.
  EXPECT_EQ(tok_->eot_id(), std::min({ids_.im_end, ids_.eot, ids_.endoftext}));
  EXPECT_TRUE(tok_->vocab().has_attr(ids_.unused, TokenAttr::kUnused));
  // gpt-oss's structural tokens are user-defined: always matched, always rendered.
  EXPECT_TRUE(tok_->vocab().has_attr(ids_.channel, TokenAttr::kUserDefined));
  EXPECT_EQ(parts("a<|channel|>b", false),
            (std::vector<std::string>{"'a'", id(ids_.channel), "'b'"}));
}

TEST_F(SpecialTokensTest, RenderingOfSpecialTokens) {
  EXPECT_EQ(tok_->token_to_piece(ids_.im_end, false), "");
  EXPECT_EQ(tok_->token_to_piece(ids_.im_end, true), "<|im_end|>");
  EXPECT_EQ(tok_->token_to_piece(ids_.tool, false), "<tool>");  // user-defined: always
  EXPECT_EQ(tok_->token_to_piece(0, false), "");                // <unk>
  EXPECT_EQ(tok_->token_to_piece(0, true), "<unk>");
  EXPECT_EQ(tok_->token_to_piece(-1, true), "");
  EXPECT_EQ(tok_->token_to_piece(tok_->vocab_size(), true), "");
}

TEST_F(SpecialTokensTest, SpmPrefixesASpaceAfterEverySpecialToken) {
  const auto ids = tok_->encode("<|im_start|>hi<|im_end|>", true, true);
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids[0], 1);  // BOS
  EXPECT_EQ(ids[1], ids_.im_start);
  EXPECT_EQ(ids.back(), ids_.im_end);
  EXPECT_EQ(tok_->decode(ids, true), "<s><|im_start|> hi<|im_end|>");
  EXPECT_EQ(tok_->decode(ids, false), " hi");
  // Without parse_special the markup is plain text and round-trips.
  const auto plain = tok_->encode("<|im_start|>hi<|im_end|>", false, false);
  EXPECT_EQ(tok_->decode(plain, false), "<|im_start|>hi<|im_end|>");
}

TEST_F(SpecialTokensTest, ControlTokensInsidePlainSpansStayText) {
  // "<|im_start|>user\n" and "<|im_end|>" are markup; the user wrote "<|im_start|>system</s>"
  // (bytes [17, 39)).
  const std::string text = "<|im_start|>user\n<|im_start|>system</s><|im_end|>";
  const TextSpans plain = {{17, 39}};
  const auto described = describe(matcher_.partition(tok_->vocab(), text, true, plain), text);
  EXPECT_EQ(described, (std::vector<std::string>{
                           id(ids_.im_start), "'user\n<|im_start|>system</s>'", id(ids_.im_end)}));
  // A token straddling a span's edge is text too; user-defined tokens match everywhere (as
  // llama.cpp does with parse_special off).
  EXPECT_EQ(describe(matcher_.partition(tok_->vocab(), "<|im_end|><tool>", true, {{3, 5}}),
                     "<|im_end|><tool>"),
            (std::vector<std::string>{"'<|im_end|>'", id(ids_.tool)}));
  // encode() with spans: the same ids as encoding the plain part without parse_special.
  TrackedText tracked{text, plain};
  const auto ids = tok_->encode(tracked, true, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), ids_.im_start), 1);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);  // no </s> from the user's text
  EXPECT_EQ(tok_->decode(ids, true), "<s><|im_start|> user\n<|im_start|>system</s><|im_end|>");
  // Without special-token text in the spans, the ids equal the untracked encoding.
  const std::string normal = "<|im_start|>user\nhello there<|im_end|>";
  EXPECT_EQ(tok_->encode(TrackedText{normal, {{17, 28}}}, true, true),
            tok_->encode(normal, true, true));
}

TEST(SpecialTokenAttrTest, Phi3SpecialTokensSwallowFollowingWhitespace) {
  Ids ids{};
  auto v = special_vocab(&ids);
  auto w = testing::to_writer(v);
  w.set("general.name", "Phi3-mini");
  auto tok = testing::load_tokenizer(w);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const Vocab& vocab = tok->vocab();
  EXPECT_TRUE(vocab.has_attr(ids.im_end, TokenAttr::kRstrip));
  EXPECT_TRUE(vocab.has_attr(ids.tool, TokenAttr::kRstrip));
  EXPECT_TRUE(vocab.has_attr(2, TokenAttr::kRstrip));   // </s>
  EXPECT_FALSE(vocab.has_attr(1, TokenAttr::kRstrip));  // <s>
  EXPECT_FALSE(vocab.has_attr(ids.endoftext, TokenAttr::kRstrip));
  SpecialTokenMatcher m(vocab);
  const std::string text = "a<|im_end|> \n\t b<s>  c";
  EXPECT_EQ(
      describe(m.partition(vocab, text, true), text),
      (std::vector<std::string>{"'a'", "#" + std::to_string(ids.im_end), "'b'", "#1", "'  c'"}));
  const std::string only_space = "<tool>   ";
  EXPECT_EQ(describe(m.partition(vocab, only_space, false), only_space),
            (std::vector<std::string>{"#" + std::to_string(ids.tool)}));
}

TEST(SpecialTokenAttrTest, LstripSwallowsPrecedingWhitespace) {
  auto v = testing::bpe_base("jina-v2-de");
  v.tokens.push_back("<mask>");
  v.types.push_back(kControl);
  const TokenId mask = static_cast<TokenId>(v.tokens.size() - 1);
  auto tok = testing::load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  ASSERT_TRUE(tok->vocab().has_attr(mask, TokenAttr::kLstrip));
  SpecialTokenMatcher m(tok->vocab());
  const std::string text = "a \t <mask> b";
  EXPECT_EQ(describe(m.partition(tok->vocab(), text, true), text),
            (std::vector<std::string>{"'a'", "#" + std::to_string(mask), "' b'"}));
}

}  // namespace
}  // namespace keel::tokenizer
