// stories260K (SPM, 512 tokens, no add_bos_token key): every string of the reference
// tokenize.json gives llama.cpp's ids with BOS and special-token parsing (llama-tokenize's
// defaults), without BOS, and without special-token parsing; decode matches llama.cpp's
// rendering of the first token after BOS.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {
namespace {

Result<Tokenizer> load_stories() {
  KEEL_ASSIGN_OR_RETURN(
      gguf::GgufFile f,
      gguf::GgufFile::open(testing::shared_path("models/stories260K/stories260K.gguf"),
                           {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

std::vector<TokenId> ids_of(const nlohmann::json& j) { return j.get<std::vector<TokenId>>(); }

TEST(StoriesTokenizerTest, MatchesLlamaCppReferenceTokenizations) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_stories();
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->type(), VocabType::kSpm);
  EXPECT_TRUE(tok->add_bos());  // no add_bos_token key: SPM adds BOS by default
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_FALSE(tok->is_eog(1));
  EXPECT_EQ(tok->special_ids().sep, kNoToken);  // stored as 0xFFFFFFFF: unset
  const auto doc = nlohmann::json::parse(
      testing::read_file(testing::shared_path("models/stories260K/reference/tokenize.json")));
  const auto& cases = doc.at("cases");
  ASSERT_EQ(cases.size(), 20u);
  int matched = 0;
  for (const auto& c : cases) {
    const std::string text = c.at("text").get<std::string>();
    const auto with_bos = tok->encode(text, true, true);
    const auto no_bos = tok->encode(text, false, true);
    const auto no_parse = tok->encode(text, true, false);
    EXPECT_EQ(with_bos, ids_of(c.at("ids_with_bos"))) << "'" << text << "'";
    EXPECT_EQ(no_bos, ids_of(c.at("ids_no_bos"))) << "'" << text << "'";
    EXPECT_EQ(no_parse, ids_of(c.at("ids_with_bos_no_parse_special"))) << "'" << text << "'";
    matched += with_bos == ids_of(c.at("ids_with_bos")) && no_bos == ids_of(c.at("ids_no_bos")) &&
               no_parse == ids_of(c.at("ids_with_bos_no_parse_special"));
  }
  std::cout << "[ stories  ] " << matched << "/" << cases.size()
            << " strings match llama.cpp in all three modes\n";
}

TEST(StoriesTokenizerTest, DecodeKeepsTheSpaceAfterBosAndStripsItWithout) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_stories();
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const std::vector<TokenId> once = {1, 403, 407, 261, 378};  // "Once upon a time" with BOS
  EXPECT_EQ(tok->decode(once, false), " Once upon a time");
  EXPECT_EQ(tok->decode(once, true), "<s> Once upon a time");
  EXPECT_EQ(tok->decode(std::span(once).subspan(1), false), "Once upon a time");
  EXPECT_EQ(tok->token_to_piece(403, false), " Once");
  EXPECT_EQ(tok->token_to_piece(1, false), "");
  EXPECT_EQ(tok->token_to_piece(1, true), "<s>");
  EXPECT_EQ(tok->token_to_piece(13, false), "\n");  // <0x0A>
}

TEST(StoriesTokenizerTest, LiteralSpecialTokensNeedParseSpecial) {
  KEEL_REQUIRE_SHARED();
  auto tok = load_stories();
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const auto parsed = tok->encode("<s>a</s>", false, true);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(parsed.back(), 2);
  for (TokenId id : tok->encode("<s>a</s>", false, false)) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  EXPECT_EQ(tok->decode(tok->encode("<s>a</s>", false, false), false), "<s>a</s>");
}

}  // namespace
}  // namespace keel::tokenizer
