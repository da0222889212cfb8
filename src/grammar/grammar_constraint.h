// GrammarConstraint: one request's structured-output state — the matcher state after the tokens
// generated so far and the tokens still allowed — as a sampling::LogitConstraint. mask() leaves
// the tokens TokenMasker allows (budget-aware: the output can always be closed, and EOG comes, by
// max_tokens); accept() advances the state by the token's bytes. An EOG token ends it. A token the
// grammar rejects (only possible for tokens it did not choose, e.g. resumed ones) puts it in a
// failed state that allows only EOG tokens, so the request ends rather than continuing unchecked.
// Thread safety: one per request, used by the thread that runs its Sampler; the TokenMasker it
// shares must be used by that thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/matcher.h"
#include "grammar/token_masker.h"
#include "sampling/logit_constraint.h"

namespace keel::grammar {

class GrammarConstraint : public sampling::LogitConstraint {
 public:
  // max_tokens: tokens this request may generate in all (EOG included); ≤ 0 for no budget.
  GrammarConstraint(std::shared_ptr<TokenMasker> masker, int32_t max_tokens);

  void mask(std::span<float> logits) override;
  void accept(int32_t token) override;

  // The tokens allowed next (what mask() keeps), for tests and benchmarks.
  [[nodiscard]] const TokenBits& allowed();
  [[nodiscard]] bool complete() const { return state_.has_complete(); }
  [[nodiscard]] bool failed() const { return failed_; }
  [[nodiscard]] const StackSet& state() const { return state_; }

 private:
  std::shared_ptr<TokenMasker> masker_;
  StackSet state_;
  int64_t left_;  // tokens still allowed, this one included (≤ 0: unlimited)
  bool failed_ = false;
  bool ended_ = false;  // an EOG token was accepted
  TokenBits bits_;
};

}  // namespace keel::grammar
