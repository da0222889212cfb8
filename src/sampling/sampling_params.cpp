// SamplingParams::validate: one check per parameter, each message naming the parameter, its
// value and the allowed range. Comparisons are written so that NaN fails them.
#include "sampling/sampling_params.h"

#include <fmt/format.h>

#include <cmath>

namespace keel::sampling {
namespace {

Status bad(std::string_view param, float value, std::string_view range) {
  return Status::invalid_argument(
      fmt::format("{} must be {}, got {}", param, range, static_cast<double>(value)));
}

Status validate_logit_bias(const std::vector<std::pair<int32_t, float>>& bias, int32_t vocab_size) {
  for (const auto& [token_id, value] : bias) {
    if (token_id < 0 || token_id >= vocab_size) {
      return Status::invalid_argument(
          fmt::format("logit_bias token id {} is out of range [0, {})", token_id, vocab_size));
    }
    if (std::isnan(value) || (std::isinf(value) && value > 0)) {
      return Status::invalid_argument(
          fmt::format("logit_bias for token id {} must be a number or -inf, got {}", token_id,
                      static_cast<double>(value)));
    }
  }
  return Status();
}

}  // namespace

Status SamplingParams::validate(int32_t vocab_size) const {
  if (vocab_size <= 0) {
    return Status::invalid_argument(fmt::format("vocab_size must be > 0, got {}", vocab_size));
  }
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
    return bad("temperature", temperature, "a finite number >= 0");
  }
  if (top_k < -1) {
    return Status::invalid_argument(
        fmt::format("top_k must be -1 or 0 (disabled) or a positive count, got {}", top_k));
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p", top_p, "in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p", min_p, "in [0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) {
    return bad("repetition_penalty", repetition_penalty, "a finite number > 0");
  }
  constexpr float kMax = kMaxAbsPresenceFrequencyPenalty;
  if (!(presence_penalty >= -kMax && presence_penalty <= kMax)) {
    return bad("presence_penalty", presence_penalty, "in [-2, 2]");
  }
  if (!(frequency_penalty >= -kMax && frequency_penalty <= kMax)) {
    return bad("frequency_penalty", frequency_penalty, "in [-2, 2]");
  }
  if (logprobs.has_value() && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return Status::invalid_argument(
        fmt::format("logprobs must be in [0, {}], got {}", kMaxLogprobs, *logprobs));
  }
  return validate_logit_bias(logit_bias, vocab_size);
}

}  // namespace keel::sampling
