// Token masks over real vocabularies (Llama 2 SentencePiece with byte fallback, GPT-2 byte-level
// BPE) equal a brute-force check of every token's bytes against the matcher, with and without a
// token budget, along random walks through JSON grammars; GrammarConstraint's budget closes the
// output in time.
#include "grammar/token_masker.h"

#include <gtest/gtest.h>

#include <random>

#include "gguf/reader.h"
#include "grammar/gbnf_parser.h"
#include "grammar/grammar_constraint.h"
#include "grammar/json_schema.h"
#include "support/test_support.h"

namespace keel::grammar {
namespace {

using Json = nlohmann::json;

std::shared_ptr<const TokenTrie> load_trie(const std::string& relative) {
  auto f =
      gguf::GgufFile::open(keel::testing::shared_path(relative), {.mode = gguf::DataMode::kNone});
  EXPECT_TRUE(f.ok()) << f.error().to_string();
  if (!f.ok()) return nullptr;
  auto tok = tokenizer::Tokenizer::from_gguf(*f);
  EXPECT_TRUE(tok.ok()) << tok.error().to_string();
  if (!tok.ok()) return nullptr;
  return std::make_shared<const TokenTrie>(TokenTrie::from_tokenizer(*tok));
}

std::shared_ptr<const Grammar> grammar_of(const std::string& gbnf) {
  Result<Grammar> g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.error().to_string();
  return std::make_shared<const Grammar>(g.ok() ? std::move(g).value() : Grammar{});
}

// The mask by definition: every token whose bytes the matcher accepts and, under a budget, whose
// state after it can close in time; EOG when complete.
TokenBits brute_force(const Grammar& g, const TokenTrie& trie, const StackSet& state,
                      int64_t left) {
  TokenBits bits((static_cast<size_t>(trie.vocab_size()) + 63) / 64, 0);
  for (int32_t t = 0; t < trie.vocab_size(); ++t) {
    if (trie.piece(t).empty()) continue;
    StackSet s = state;
    if (!advance(g, trie.piece(t), &s)) continue;
    if (left > 0 && static_cast<int64_t>(min_remaining(g, s)) > left - 2) continue;
    set_bit(bits, t);
  }
  if (state.has_complete()) {
    for (int32_t t : trie.eog()) set_bit(bits, t);
  }
  return bits;
}

int count(const TokenBits& b) {
  int n = 0;
  for (uint64_t w : b) n += __builtin_popcountll(w);
  return n;
}

void check_walks(const std::string& vocab, const std::string& gbnf, int walks, int steps) {
  KEEL_REQUIRE_SHARED();
  auto trie = load_trie(vocab);
  ASSERT_NE(trie, nullptr);
  auto g = grammar_of(gbnf);
  TokenMasker masker(g, trie);
  std::mt19937 rng(11);
  for (int walk = 0; walk < walks; ++walk) {
    StackSet state = initial_state(*g);
    for (int i = 0; i < steps; ++i) {
      const int64_t left = (i % 3 == 0) ? 0 : static_cast<int64_t>(rng() % 12) + 1;
      TokenBits got;
      masker.compute(state, left, &got);
      TokenBits want = brute_force(*g, *trie, state, left);
      if (count(want) == 0) want = brute_force(*g, *trie, state, 0);  // the documented fallback
      ASSERT_EQ(got, want) << vocab << " step " << i << " left " << left << ": " << count(got)
                           << " vs " << count(want);
      // Next: a random allowed non-EOG token (unbudgeted), to move through varied states.
      TokenBits any = brute_force(*g, *trie, state, 0);
      std::vector<int32_t> options;
      for (int32_t t = 0; t < trie->vocab_size(); ++t) {
        if (test_bit(any, t) && !trie->piece(t).empty()) options.push_back(t);
      }
      if (options.empty()) break;
      ASSERT_TRUE(advance(*g, trie->piece(options[rng() % options.size()]), &state));
    }
  }
  const MaskerStats& st = masker.stats();
  std::printf("[ masker ] %s: %lld masks, %lld state hits, %lld entries, %lld dependent checks\n",
              vocab.c_str(), static_cast<long long>(st.masks),
              static_cast<long long>(st.state_hits), static_cast<long long>(st.entries_built),
              static_cast<long long>(st.dependent_checks));
  EXPECT_GT(st.entries_built, 0);
}

const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string"}, "n": {"type": "integer"},
  "list": {"type": "array", "items": {"type": "object", "properties": {"ok": {"type": "boolean"}},
           "required": ["ok"]}}}, "required": ["name", "n", "list"]})";

TEST(TokenMasker, MatchesBruteForceLlamaSpm) {
  Result<std::string> gbnf = json_schema_to_gbnf(Json::parse(kSchema));
  ASSERT_TRUE(gbnf.ok());
  check_walks("vocab/ggml-vocab-llama-spm.gguf", *gbnf, 2, 12);
}

// The JSON Schema keywords' grammars (digit automata, formats, a format ∩ pattern product of byte
// classes) through the masker over a real 32K vocabulary.
TEST(TokenMasker, MatchesBruteForceWithSchemaKeywords) {
  Result<std::string> gbnf = json_schema_to_gbnf(Json::parse(R"({"type": "object", "properties": {
      "n": {"type": "integer", "minimum": -40, "maximum": 1234, "multipleOf": 3},
      "when": {"type": "string", "format": "date-time"},
      "mail": {"type": "string", "format": "email", "pattern": "^(?!\\.)[a-z.]+@[a-z]+\\.com$"}},
      "required": ["n", "when", "mail"]})"));
  ASSERT_TRUE(gbnf.ok()) << gbnf.error().to_string();
  check_walks("vocab/ggml-vocab-llama-spm.gguf", *gbnf, 1, 14);
}

TEST(TokenMasker, MatchesBruteForceGpt2ByteLevel) {
  // Fewer steps: under ASan the brute force over 50K tokens dominates the suite.
  check_walks("vocab/ggml-vocab-gpt-2.gguf", json_object_gbnf(), 1, 3);
}

TEST(TokenMasker, PiecesAreExactBytes) {
  KEEL_REQUIRE_SHARED();
  auto spm = load_trie("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(spm, nullptr);
  // Llama 2: "▁the" is " the"; <0x0A> is a newline byte; <s> and </s> are never pieces.
  bool space_the = false, newline = false;
  for (int32_t t = 0; t < spm->vocab_size(); ++t) {
    space_the = space_the || spm->piece(t) == " the";
    newline = newline || spm->piece(t) == "\n";
  }
  EXPECT_TRUE(space_the);
  EXPECT_TRUE(newline);
  EXPECT_TRUE(spm->piece(1).empty());
  EXPECT_TRUE(spm->piece(2).empty());
  EXPECT_EQ(spm->eog().size(), 1u);
}

TEST(GrammarConstraint, BudgetClosesInTime) {
  KEEL_REQUIRE_SHARED();
  auto trie = load_trie("vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_NE(trie, nullptr);
  auto g = grammar_of(json_object_gbnf());
  auto masker = std::make_shared<TokenMasker>(g, trie);
  std::mt19937 rng(5);
  for (int max_tokens : {3, 8, 20}) {
    GrammarConstraint c(masker, max_tokens);
    bool ended = false;
    std::string text;
    for (int i = 0; i < max_tokens && !ended; ++i) {
      const TokenBits& bits = c.allowed();
      std::vector<int32_t> options;
      for (int32_t t = 0; t < trie->vocab_size(); ++t) {
        if (test_bit(bits, t)) options.push_back(t);
      }
      ASSERT_FALSE(options.empty());
      const int32_t t = options[rng() % options.size()];
      ended = t == trie->eog()[0];
      if (!ended) text += trie->piece(t);
      c.accept(t);
      ASSERT_FALSE(c.failed());
    }
    EXPECT_TRUE(ended) << "max_tokens " << max_tokens << ": " << text;
    EXPECT_FALSE(Json::parse(text, nullptr, false).is_discarded()) << text;
  }
}

}  // namespace
}  // namespace keel::grammar
