// llama.cpp's test-tokenizer-0 over the shared vocabularies: every case of each
// ggml-vocab-NAME.gguf.inp must encode (add_special = false, parse_special = false) to the ids on
// the matching line of ggml-vocab-NAME.gguf.out. One parameterized test per vocabulary; a failure
// names the vocabulary, the case number and the input.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "tokenizer/space_cleaner.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {
namespace {

struct VocabCase {
  std::string text;
  std::vector<TokenId> ids;
};

// Splits like llama.cpp's read_tests(): inputs are separated by "\n__ggml_vocab_test__\n" (a
// separator at the very end opens no further case); output lines are space-separated ids.
std::vector<VocabCase> read_cases(const std::string& inp_path, const std::string& out_path) {
  const std::string raw = testing::read_file(inp_path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> inputs;
  size_t pos = 0;
  while (pos < raw.size()) {
    const size_t next = raw.find(sep, pos);
    if (next == std::string::npos) {
      inputs.push_back(raw.substr(pos));
      break;
    }
    inputs.push_back(raw.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::istringstream out(testing::read_file(out_path));
  std::vector<VocabCase> cases;
  std::string line;
  size_t i = 0;
  while (std::getline(out, line)) {
    VocabCase c;
    if (i < inputs.size()) c.text = inputs[i];
    std::istringstream ids(line);
    for (TokenId id; ids >> id;) c.ids.push_back(id);
    cases.push_back(std::move(c));
    ++i;
  }
  EXPECT_EQ(inputs.size(), cases.size()) << inp_path << " and " << out_path << " disagree";
  return cases;
}

std::string escaped(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  return out;
}

std::string vocab_path(const std::string& name) {
  return testing::shared_path("vocab/ggml-vocab-" + name + ".gguf");
}

Result<Tokenizer> load(const std::string& name) {
  KEEL_ASSIGN_OR_RETURN(gguf::GgufFile f,
                        gguf::GgufFile::open(vocab_path(name), {.mode = gguf::DataMode::kNone}));
  return Tokenizer::from_gguf(f);
}

// The vocabularies with a .gguf and .inp/.out pairs that keel supports.
const std::vector<std::string> kVocabs = {"llama-spm",    "phi-3",          "gpt-2",
                                          "deepseek-llm", "deepseek-coder", "falcon",
                                          "mpt",          "starcoder",      "refact"};

class VocabFileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabFileTest, EncodesEveryCaseLikeLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const std::string name = GetParam();
  auto tok = load(name);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const auto cases = read_cases(vocab_path(name) + ".inp", vocab_path(name) + ".out");
  ASSERT_FALSE(cases.empty());
  size_t passed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<TokenId> ids = tok->encode(cases[i].text, false, false);
    EXPECT_EQ(ids, cases[i].ids) << name << " case #" << i << " '" << escaped(cases[i].text) << "'";
    if (ids == cases[i].ids) ++passed;
  }
  std::cout << "[ vocab    ] " << name << ": " << passed << "/" << cases.size()
            << " cases match llama.cpp\n";
}

TEST_P(VocabFileTest, DecodeInvertsEncode) {
  KEEL_REQUIRE_SHARED();
  const std::string name = GetParam();
  auto tok = load(name);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  const auto cases = read_cases(vocab_path(name) + ".inp", vocab_path(name) + ".out");
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string& text = cases[i].text;
    const std::vector<TokenId> ids = tok->encode(text, false, false);
    // Tokenization is lossless: the pieces spell the input (after SPM's space prefix).
    std::string pieces;
    for (TokenId id : ids) pieces += tok->token_to_piece(id, true);
    const bool prefixed = tok->add_space_prefix() && !text.empty();
    EXPECT_EQ(pieces, (prefixed ? " " : "") + text) << name << " case #" << i;
    // decode() gives the text back, up to llama.cpp's clean_spaces for vocabularies that have it.
    const std::string expected = tok->clean_spaces() ? clean_spaces_batch(text) : text;
    EXPECT_EQ(tok->decode(ids, false), expected) << name << " case #" << i;
  }
}

INSTANTIATE_TEST_SUITE_P(SharedVocabs, VocabFileTest, ::testing::ValuesIn(kVocabs),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) c = (c == '-') ? '_' : c;
                           return n;
                         });

// Every shared vocabulary with test cases is covered above, or refused as unsupported below.
TEST(VocabFileInventoryTest, EveryGgufWithCasesIsTested) {
  KEEL_REQUIRE_SHARED();
  std::set<std::string> tested(kVocabs.begin(), kVocabs.end());
  tested.insert("bert-bge");
  for (const auto& entry : std::filesystem::directory_iterator(testing::shared_path("vocab"))) {
    const std::string file = entry.path().filename().string();
    const std::string prefix = "ggml-vocab-";
    const std::string suffix = ".gguf";
    if (file.rfind(prefix, 0) != 0 || file.size() <= prefix.size() + suffix.size() ||
        file.compare(file.size() - suffix.size(), suffix.size(), suffix) != 0) {
      continue;
    }
    const std::string name =
        file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
    if (!std::filesystem::exists(entry.path().string() + ".inp")) continue;
    EXPECT_TRUE(tested.count(name)) << name << " has test cases but is not in kVocabs";
  }
}

TEST(VocabFileInventoryTest, WordPieceVocabIsRefusedClearly) {
  KEEL_REQUIRE_SHARED();
  auto tok = load("bert-bge");
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.error().code(), StatusCode::kUnsupported);
  EXPECT_NE(tok.error().message().find("'bert'"), std::string::npos) << tok.error().message();
  EXPECT_NE(tok.error().message().find("WordPiece"), std::string::npos) << tok.error().message();
}

// As llama.cpp (and Hugging Face), user-defined tokens are matched in the text even without
// parse_special: MPT's runs of spaces are user-defined tokens.
TEST(VocabFileInventoryTest, UserDefinedTokensMatchWithoutParseSpecial) {
  KEEL_REQUIRE_SHARED();
  auto mpt = load("mpt");
  ASSERT_TRUE(mpt.ok()) << mpt.error().to_string();
  const TokenId two_spaces = mpt->find_token("  ");
  ASSERT_NE(two_spaces, kNoToken);
  EXPECT_TRUE(mpt->vocab().has_attr(two_spaces, TokenAttr::kUserDefined));
  EXPECT_EQ(mpt->encode("  Hello", false, false),
            (std::vector<TokenId>{two_spaces, mpt->find_token("Hello")}));
  // Control tokens are not: "<|endoftext|>" stays text unless parse_special.
  const TokenId eot = mpt->find_token("<|endoftext|>");
  EXPECT_EQ(mpt->encode("<|endoftext|>", false, true), std::vector<TokenId>{eot});
  const auto as_text = mpt->encode("<|endoftext|>", false, false);
  EXPECT_GT(as_text.size(), 1u);
  EXPECT_EQ(mpt->decode(as_text, false), "<|endoftext|>");
}

// Vocabularies without test cases still load, with the expected kind of tokenizer.
TEST(VocabFileInventoryTest, VocabsWithoutCasesLoad) {
  KEEL_REQUIRE_SHARED();
  auto neox = load("gpt-neox");  // no tokenizer.ggml.pre: the 'default' pre-tokenizer
  ASSERT_TRUE(neox.ok()) << neox.error().to_string();
  EXPECT_EQ(neox->type(), VocabType::kBpe);
  EXPECT_EQ(neox->pre_name(), "");
  EXPECT_EQ(neox->vocab().pre_kind, PreTokenizerKind::kDefault);
  EXPECT_EQ(neox->decode(neox->encode("Hello world, 123 ok", false, false), false),
            "Hello world, 123 ok");
  auto baichuan = load("baichuan");  // SPM without add_bos_token: BOS by default
  ASSERT_TRUE(baichuan.ok()) << baichuan.error().to_string();
  EXPECT_EQ(baichuan->type(), VocabType::kSpm);
  EXPECT_TRUE(baichuan->add_bos());
  const auto ids = baichuan->encode("Hello world", true, false);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), baichuan->bos_id());
  EXPECT_EQ(baichuan->decode(ids, false), " Hello world");  // llama.cpp keeps the space after BOS
}

}  // namespace
}  // namespace keel::tokenizer
