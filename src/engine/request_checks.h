// Submit-time checks that every engine kind (engine.h, semi_pd_engine.h) makes the same way, so
// a request is refused with the same message whichever engine serves it: a non-empty prompt of
// in-vocabulary token ids, max_tokens ≥ 1, a tokenizer when stop strings are asked for, and the
// prompt plus max_tokens within the model's context length, valid sampling parameters, and room
// in the waiting queue.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "engine/types.h"

namespace keel::engine {

// The prompt is non-empty, every id is in [0, n_vocab), max_tokens ≥ 1, and stop strings come
// with a tokenizer (`has_tokenizer`).
[[nodiscard]] Status check_request_basics(const GenerationRequest& request, int64_t n_vocab,
                                          bool has_tokenizer);

// prompt_tokens + max_tokens ≤ max_model_len (OutOfRange naming both otherwise).
[[nodiscard]] Status check_context_length(int64_t prompt_tokens, int64_t max_tokens,
                                          int64_t max_model_len);

// What an engine allows every request.
struct RequestLimits {
  int64_t n_vocab = 0;
  bool has_tokenizer = false;
  int64_t max_model_len = 0;
};

// The checks above, then the context length of the original prompt (resumed tokens count in
// max_tokens) and the sampling parameters.
[[nodiscard]] Status check_request(const GenerationRequest& request, const RequestLimits& limits);

// ResourceExhausted (a retry may succeed) when `waiting` requests fill the queue of `max_waiting`.
[[nodiscard]] Status check_waiting(int64_t waiting, int64_t max_waiting);

}  // namespace keel::engine
