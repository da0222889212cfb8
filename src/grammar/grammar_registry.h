// GrammarRegistry: turns a request's grammar text into its GrammarConstraint, sharing the parsed
// grammar and its TokenMasker (and so the mask caches) among requests with the same text, and one
// TokenTrie per vocabulary. Keeps the most recently used kMaxGrammars grammars.
// Thread safety: make() on one thread (the engine thread). The maskers it shares are used only by
// the thread that samples (the engine's executor), one request at a time — see token_masker.h.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/result.h"
#include "grammar/grammar_constraint.h"
#include "grammar/token_masker.h"
#include "grammar/token_trie.h"

namespace keel::grammar {

class GrammarRegistry {
 public:
  static constexpr size_t kMaxGrammars = 16;

  explicit GrammarRegistry(std::shared_ptr<const TokenTrie> trie) : trie_(std::move(trie)) {}

  // A fresh constraint for `gbnf` (a GBNF grammar) with `max_tokens` tokens to generate
  // (≤ 0: no budget). InvalidArgument when the grammar does not parse.
  Result<std::unique_ptr<GrammarConstraint>> make(std::string_view gbnf, int32_t max_tokens);

  [[nodiscard]] const TokenTrie& trie() const { return *trie_; }

 private:
  std::shared_ptr<const TokenTrie> trie_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string,
                     std::pair<std::shared_ptr<TokenMasker>, std::list<std::string>::iterator>>
      maskers_;
};

}  // namespace keel::grammar
