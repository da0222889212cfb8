// LogitConstraint: a per-request rule on which tokens may come next (structured outputs: the
// grammar engine in src/grammar implements it). The Sampler applies it before every other stage,
// so logit_bias, penalties, greedy and truncation only ever see allowed tokens, and feeds it every
// token it records. An interface so that sampling does not depend on the grammar module.
// Thread safety: one per request, used by the thread that runs its Sampler.
#pragma once

#include <cstdint>
#include <span>

namespace keel::sampling {

class LogitConstraint {
 public:
  virtual ~LogitConstraint() = default;
  // Sets the logits of the tokens that may not come next to -inf. Leaves at least one token.
  virtual void mask(std::span<float> logits) = 0;
  // Records the token that was generated (it advances the constraint's state).
  virtual void accept(int32_t token) = 0;
};

}  // namespace keel::sampling
