// Submit-time checks that every engine kind (engine.h, semi_pd_engine.h) makes the same way, so
// a request is refused with the same message whichever engine serves it: a non-empty prompt of
// in-vocabulary token ids, max_tokens ≥ 1, a tokenizer when stop strings are asked for, and the
// prompt plus max_tokens within the model's context length.
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

}  // namespace keel::engine
