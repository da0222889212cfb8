// Resumed requests: validation and views (see resumed_request.h).
#include "engine/resumed_request.h"

#include <algorithm>
#include <optional>
#include <string>

#include "engine/stop_strings.h"

namespace keel::engine {

std::span<const int32_t> original_prompt(const GenerationRequest& request) {
  return std::span<const int32_t>(request.prompt_tokens)
      .first(static_cast<size_t>(request.num_original_prompt_tokens()));
}

std::span<const int32_t> resumed_span(const GenerationRequest& request) {
  return std::span<const int32_t>(request.prompt_tokens)
      .last(static_cast<size_t>(request.resumed_tokens));
}

Status validate_resumed(const GenerationRequest& request, std::span<const int32_t> eog_token_ids,
                        const tokenizer::Tokenizer* tokenizer) {
  const int32_t k = request.resumed_tokens;
  if (k == 0) return Status::ok_status();
  if (k < 0 || static_cast<size_t>(k) >= request.prompt_tokens.size()) {
    return Status::invalid_argument(
        "resumed_tokens must be in [0, " + std::to_string(request.prompt_tokens.size()) +
        ") (the prompt tokens, of which the resumed ones are the tail), got " + std::to_string(k));
  }
  if (k >= request.max_tokens) {
    return Status::invalid_argument("resumed_tokens (" + std::to_string(k) +
                                    ") must be below max_tokens (" +
                                    std::to_string(request.max_tokens) + ")");
  }
  const auto contains = [](std::span<const int32_t> ids, int32_t t) {
    return std::find(ids.begin(), ids.end(), t) != ids.end();
  };
  const std::span<const int32_t> resumed = resumed_span(request);
  for (size_t i = 0; i < resumed.size(); ++i) {
    const int32_t t = resumed[i];
    if ((!request.ignore_eos && contains(eog_token_ids, t)) ||
        contains(request.stop_token_ids, t)) {
      return Status::invalid_argument("resumed token " + std::to_string(i) + " (id " +
                                      std::to_string(t) +
                                      ") would have finished the earlier attempt");
    }
  }
  if (!request.stop_strings.empty() && tokenizer != nullptr) {
    StopStringDetector detector(*tokenizer, request.stop_strings);
    if (std::optional<int32_t> match = detector.resume(resumed)) {
      return Status::invalid_argument(
          "stop string " + std::to_string(*match) +
          " completes inside the resumed tokens: the earlier attempt had finished");
    }
  }
  return Status::ok_status();
}

int32_t usage_cached_tokens(const GenerationRequest& request, int32_t num_cached) {
  return std::clamp(num_cached, 0, request.num_original_prompt_tokens());
}

}  // namespace keel::engine
