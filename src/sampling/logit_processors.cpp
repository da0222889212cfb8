// Logit processors: logit_bias and penalties.
#include "sampling/logit_processors.h"

#include "core/check.h"

namespace keel::sampling {

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  const auto vocab_size = static_cast<int64_t>(logits.size());
  for (const auto& [token_id, value] : bias) {
    KEEL_CHECK(token_id >= 0 && token_id < vocab_size);
    logits[static_cast<size_t>(token_id)] += value;
  }
}

void apply_penalties(std::span<float> logits, const TokenHistory& history, float repetition,
                     float presence, float frequency) {
  const bool use_repetition = repetition != 1.0f;
  const bool use_additive = presence != 0.0f || frequency != 0.0f;
  if (!use_repetition && !use_additive) return;
  const auto vocab_size = static_cast<int64_t>(logits.size());
  for (const TokenHistory::Entry& e : history.entries()) {
    KEEL_CHECK(e.token_id < vocab_size);
    float& logit = logits[static_cast<size_t>(e.token_id)];
    if (use_repetition && (e.in_prompt || e.output_count > 0)) {
      logit = logit > 0.0f ? logit / repetition : logit * repetition;
    }
    if (use_additive && e.output_count > 0) {
      logit -= presence + frequency * static_cast<float>(e.output_count);
    }
  }
}

}  // namespace keel::sampling
