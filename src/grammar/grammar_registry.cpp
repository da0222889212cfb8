// GrammarRegistry (grammar_registry.h).
#include "grammar/grammar_registry.h"

#include "grammar/gbnf_parser.h"

namespace keel::grammar {

Result<std::unique_ptr<GrammarConstraint>> GrammarRegistry::make(std::string_view gbnf,
                                                                 int32_t max_tokens) {
  std::string key(gbnf);
  auto it = maskers_.find(key);
  if (it != maskers_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.second);
  } else {
    KEEL_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(gbnf));
    auto masker =
        std::make_shared<TokenMasker>(std::make_shared<const Grammar>(std::move(g)), trie_);
    if (maskers_.size() >= kMaxGrammars) {
      maskers_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    it = maskers_.emplace(key, std::make_pair(std::move(masker), lru_.begin())).first;
  }
  return std::make_unique<GrammarConstraint>(it->second.first, max_tokens);
}

}  // namespace keel::grammar
