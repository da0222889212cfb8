// Loading vocabularies from GGUF metadata: llama.cpp's defaults (BOS/EOS, add_bos, pre-tokenizer
// flags), and clear errors, never crashes, for missing or malformed metadata: missing keys,
// mistyped values, length mismatches, duplicates, malformed merges, special ids out of range.
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "synthetic_vocab.h"
#include "tokenizer/tokenizer.h"

namespace keel::tokenizer {
namespace {

using testing::bpe_base;
using testing::load_tokenizer;
using testing::spm_base;
using testing::to_writer;

// Expects `r` to fail with `code` and a message containing `needle`.
template <typename T>
void expect_error(const Result<T>& r, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(r.error().code(), code) << r.error().to_string();
  EXPECT_NE(r.error().message().find(needle), std::string::npos) << r.error().to_string();
}

TEST(VocabLoaderTest, SpmDefaults) {
  auto tok = load_tokenizer(spm_base());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->type(), VocabType::kSpm);
  EXPECT_EQ(tok->model_name(), "llama");
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->unk_id(), 0);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_TRUE(tok->add_space_prefix());
  EXPECT_FALSE(tok->clean_spaces());
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_EQ(tok->encode("", true, false), std::vector<TokenId>{1});
  EXPECT_TRUE(tok->encode("", false, false).empty());
}

TEST(VocabLoaderTest, AddBosAndAddEosKeysOverrideDefaults) {
  auto w = to_writer(spm_base());
  w.set("tokenizer.ggml.add_bos_token", false);
  w.set("tokenizer.ggml.add_eos_token", true);
  auto tok = load_tokenizer(w);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->add_eos());
  const auto ids = tok->encode("a", true, false);  // " a" -> "▁" bytes, "a" bytes, then EOS
  ASSERT_FALSE(ids.empty());
  EXPECT_NE(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
}

TEST(VocabLoaderTest, BpeDefaultsFollowThePreTokenizer) {
  auto gpt2 = load_tokenizer(bpe_base("gpt-2"));
  ASSERT_TRUE(gpt2.ok()) << gpt2.error().to_string();
  EXPECT_FALSE(gpt2->add_bos());
  EXPECT_TRUE(gpt2->clean_spaces());
  EXPECT_EQ(gpt2->bos_id(), 11);  // llama.cpp's BPE default
  auto llama3 = load_tokenizer(bpe_base("llama-bpe"));
  ASSERT_TRUE(llama3.ok()) << llama3.error().to_string();
  EXPECT_TRUE(llama3->add_bos());
  EXPECT_TRUE(llama3->vocab().ignore_merges);
  auto qwen2 = load_tokenizer(bpe_base("qwen2"));
  ASSERT_TRUE(qwen2.ok()) << qwen2.error().to_string();
  EXPECT_FALSE(qwen2->clean_spaces());
  EXPECT_EQ(qwen2->vocab().pre_kind, PreTokenizerKind::kQwen2);
}

TEST(VocabLoaderTest, MissingPreFallsBackToDefaultWithAWarning) {
  auto v = bpe_base("");
  v.pre.reset();
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  auto tok = load_tokenizer(v);
  spdlog::set_default_logger(previous);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->vocab().pre_kind, PreTokenizerKind::kDefault);
  EXPECT_NE(log.str().find("no tokenizer.ggml.pre"), std::string::npos) << log.str();
}

TEST(VocabLoaderTest, UnknownPreTokenizerIsAnError) {
  expect_error(load_tokenizer(bpe_base("no-such-pre")), StatusCode::kUnsupported,
               "unknown pre-tokenizer 'no-such-pre'");
}

TEST(VocabLoaderTest, OtherTokenizerModelsAreUnsupported) {
  for (const char* model : {"bert", "t5", "rwkv", "plamo2", "no_vocab"}) {
    auto v = spm_base();
    v.model = model;
    expect_error(load_tokenizer(v), StatusCode::kUnsupported, std::string("'") + model + "'");
  }
  auto v = spm_base();
  v.model = "mystery";
  expect_error(load_tokenizer(v), StatusCode::kUnsupported, "unknown tokenizer model 'mystery'");
}

TEST(VocabLoaderTest, MissingModelOrTokensIsNotFound) {
  gguf::GgufWriter no_model;
  no_model.set("general.architecture", "llama");
  expect_error(load_tokenizer(no_model), StatusCode::kNotFound, "tokenizer.ggml.model");
  gguf::GgufWriter no_tokens;
  no_tokens.set("tokenizer.ggml.model", "llama");
  expect_error(load_tokenizer(no_tokens), StatusCode::kNotFound, "tokenizer.ggml.tokens");
}

TEST(VocabLoaderTest, MistypedKeysAreCorrupt) {
  auto w = to_writer(spm_base());
  w.set("tokenizer.ggml.model", uint32_t{1});
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.model has type");

  w = to_writer(spm_base());
  w.set("tokenizer.ggml.tokens",
        gguf::make_array(gguf::ValueType::kInt32, std::vector<int32_t>{1, 2, 3}));
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.tokens is an array of");

  w = to_writer(spm_base());
  w.set("tokenizer.ggml.tokens", "not an array");
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "expected array");

  w = to_writer(spm_base());
  w.set("tokenizer.ggml.add_bos_token", uint8_t{1});
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.add_bos_token");

  w = to_writer(spm_base());
  w.set("tokenizer.ggml.bos_token_id", "one");
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.bos_token_id");

  auto v = spm_base();
  w = to_writer(v);
  std::vector<std::string> bad_scores(v.tokens.size(), "x");
  w.set("tokenizer.ggml.scores", gguf::make_array(gguf::ValueType::kString, bad_scores));
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.scores[0]");
}

TEST(VocabLoaderTest, EmptyTokenListIsCorrupt) {
  auto v = spm_base();
  v.tokens.clear();
  v.scores.clear();
  v.types.clear();
  expect_error(load_tokenizer(v), StatusCode::kCorrupt, "tokenizer.ggml.tokens is empty");
}

TEST(VocabLoaderTest, ArrayLengthMismatchIsCorrupt) {
  auto v = spm_base();
  v.scores.pop_back();
  expect_error(load_tokenizer(v), StatusCode::kCorrupt, "tokenizer.ggml.scores has 258 entries");
  v = spm_base();
  v.types.push_back(1);
  expect_error(load_tokenizer(v), StatusCode::kCorrupt,
               "tokenizer.ggml.token_type has 260 entries");
}

TEST(VocabLoaderTest, DuplicateTokenIsCorrupt) {
  auto v = spm_base();
  v.add(
      "\xE2\x96\x81"
      "a");
  v.add(
      "\xE2\x96\x81"
      "a");
  expect_error(load_tokenizer(v), StatusCode::kCorrupt, "duplicate token");
}

TEST(VocabLoaderTest, EmptyTokenTextIsRenamedLikeLlamaCpp) {
  auto v = spm_base();
  const int32_t id = v.add("");
  auto tok = load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->token_text(id), "[EMPTY_" + std::to_string(id) + "]");
}

TEST(VocabLoaderTest, SpecialIdOutOfRangeIsCorrupt) {
  for (const char* key : {"bos_token_id", "eos_token_id", "eot_token_id", "unknown_token_id"}) {
    auto w = to_writer(spm_base());
    w.set(std::string("tokenizer.ggml.") + key, uint32_t{100000});
    expect_error(load_tokenizer(w), StatusCode::kCorrupt,
                 std::string(key) + " = 100000 is out of range for a vocabulary of 259 tokens");
  }
}

TEST(VocabLoaderTest, UnsetSentinelKeepsTheDefaultAndMinorIdsAreIgnored) {
  auto w = to_writer(spm_base());
  w.set("tokenizer.ggml.bos_token_id", uint32_t{0xFFFFFFFF});  // unset (as stories260K's sep)
  w.set("tokenizer.ggml.eos_token_id", int32_t{-1});
  w.set("tokenizer.ggml.padding_token_id", uint32_t{5000});  // out of range: logged, ignored
  w.set("tokenizer.ggml.seperator_token_id", uint32_t{4});
  auto tok = load_tokenizer(w);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->pad_id(), kNoToken);
  EXPECT_EQ(tok->special_ids().sep, 4);
}

TEST(VocabLoaderTest, AddBosWithoutBosTokenIsCorrupt) {
  // A BPE vocabulary of 5 tokens: llama.cpp's default BOS (11) does not exist.
  auto v = testing::SyntheticVocab{};
  v.model = "gpt2";
  v.pre = "gpt-2";
  for (const char* t : {"a", "b", "c", "d", "e"}) v.tokens.push_back(t);
  auto w = to_writer(v);
  w.set("tokenizer.ggml.add_bos_token", true);
  expect_error(load_tokenizer(w), StatusCode::kCorrupt,
               "add_bos_token is true but there is no BOS");
  auto plain = load_tokenizer(v);
  ASSERT_TRUE(plain.ok()) << plain.error().to_string();
  EXPECT_EQ(plain->bos_id(), kNoToken);
}

TEST(VocabLoaderTest, MergesAreRequiredAndChecked) {
  auto v = bpe_base("gpt-2");
  v.omit_merges = true;
  expect_error(load_tokenizer(v), StatusCode::kNotFound, "tokenizer.ggml.merges");

  for (const char* bad : {"ab", "a ", "", " "}) {
    v = bpe_base("gpt-2");
    v.merges = {"a b", bad};
    expect_error(load_tokenizer(v), StatusCode::kCorrupt, "tokenizer.ggml.merges[1]");
  }

  v = bpe_base("gpt-2");
  auto w = to_writer(v);
  w.set("tokenizer.ggml.merges",
        gguf::make_array(gguf::ValueType::kUint8, std::vector<uint8_t>{1, 2}));
  expect_error(load_tokenizer(w), StatusCode::kCorrupt, "tokenizer.ggml.merges is an array of");
}

TEST(VocabLoaderTest, OddTokenTypesLoadAsUndefined) {
  auto v = spm_base();
  const int32_t weird = v.add("weird", 42);
  auto tok = load_tokenizer(v);
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  EXPECT_EQ(tok->vocab().tokens[weird].attrs, bit(TokenAttr::kUndefined));
  EXPECT_EQ(tok->token_to_piece(weird, true), "");
}

TEST(VocabLoaderTest, FromVocabRejectsInconsistentVocabularies) {
  auto tok = load_tokenizer(spm_base());
  ASSERT_TRUE(tok.ok()) << tok.error().to_string();
  Vocab v = tok->vocab();
  EXPECT_TRUE(Tokenizer::from_vocab(v).ok());
  Vocab bad_bos = v;
  bad_bos.special.bos = 100000;
  EXPECT_EQ(Tokenizer::from_vocab(bad_bos).error().code(), StatusCode::kInvalidArgument);
  Vocab bad_map = v;
  bad_map.token_to_id["<s>"] = 2;
  EXPECT_EQ(Tokenizer::from_vocab(bad_map).error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Tokenizer::from_vocab(Vocab{}).error().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::tokenizer
