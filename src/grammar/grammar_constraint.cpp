// GrammarConstraint (grammar_constraint.h).
#include "grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>

namespace keel::grammar {

GrammarConstraint::GrammarConstraint(std::shared_ptr<TokenMasker> masker, int32_t max_tokens)
    : masker_(std::move(masker)),
      state_(initial_state(masker_->grammar())),
      left_(max_tokens > 0 ? max_tokens : std::numeric_limits<int64_t>::min()) {}

const TokenBits& GrammarConstraint::allowed() {
  if (failed_ || ended_) {
    bits_.assign((static_cast<size_t>(masker_->trie().vocab_size()) + 63) / 64, 0);
    for (int32_t t : masker_->trie().eog()) set_bit(bits_, t);
    return bits_;
  }
  masker_->compute(state_, left_ > 0 ? left_ : 0, &bits_);
  return bits_;
}

void GrammarConstraint::mask(std::span<float> logits) {
  const TokenBits& bits = allowed();
  const auto n = static_cast<int32_t>(std::min<size_t>(logits.size(), bits.size() * 64));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int32_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = bits[static_cast<size_t>(w)];
    if (word == ~uint64_t{0}) continue;
    const int32_t end = std::min(n, w * 64 + 64);
    for (int32_t t = w * 64; t < end; ++t) {
      if (((word >> (t & 63)) & 1) == 0) logits[static_cast<size_t>(t)] = kNegInf;
    }
  }
  for (size_t t = static_cast<size_t>(n); t < logits.size(); ++t) logits[t] = kNegInf;
}

void GrammarConstraint::accept(int32_t token) {
  if (left_ > 0) --left_;
  if (failed_ || ended_) return;
  const TokenTrie& trie = masker_->trie();
  const auto eog = trie.eog();
  if (std::find(eog.begin(), eog.end(), token) != eog.end()) {
    ended_ = true;
    return;
  }
  if (token < 0 || token >= trie.vocab_size() || trie.piece(token).empty() ||
      !advance(masker_->grammar(), trie.piece(token), &state_)) {
    failed_ = true;
  }
}

}  // namespace keel::grammar
