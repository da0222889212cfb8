// Submit-time checks shared by the engine kinds (request_checks.h).
#include "engine/request_checks.h"

#include <string>

namespace keel::engine {

Status check_request_basics(const GenerationRequest& request, int64_t n_vocab, bool has_tokenizer) {
  if (request.prompt_tokens.empty()) return Status::invalid_argument("the prompt is empty");
  for (int32_t t : request.prompt_tokens) {
    if (t < 0 || t >= n_vocab) {
      return Status::invalid_argument("token id " + std::to_string(t) +
                                      " is outside the vocabulary [0, " + std::to_string(n_vocab) +
                                      ")");
    }
  }
  if (request.max_tokens < 1) return Status::invalid_argument("max_tokens must be at least 1");
  if (!request.stop_strings.empty() && !has_tokenizer) {
    return Status::invalid_argument("stop strings need an engine with a tokenizer");
  }
  return Status::ok_status();
}

Status check_context_length(int64_t prompt_tokens, int64_t max_tokens, int64_t max_model_len) {
  if (prompt_tokens + max_tokens <= max_model_len) return Status::ok_status();
  return Status::out_of_range("this model's maximum context length is " +
                              std::to_string(max_model_len) + " tokens, but the request needs " +
                              std::to_string(prompt_tokens) + " prompt tokens + " +
                              std::to_string(max_tokens) + " completion tokens");
}

Status check_request(const GenerationRequest& request, const RequestLimits& limits) {
  KEEL_TRY(check_request_basics(request, limits.n_vocab, limits.has_tokenizer));
  KEEL_TRY(check_context_length(request.num_original_prompt_tokens(), request.max_tokens,
                                limits.max_model_len));
  return request.sampling.validate(static_cast<int32_t>(limits.n_vocab));
}

Status check_waiting(int64_t waiting, int64_t max_waiting) {
  if (waiting < max_waiting) return Status::ok_status();
  return Status::resource_exhausted("too many requests are waiting (" +
                                    std::to_string(max_waiting) + "); retry later");
}

}  // namespace keel::engine
