// Resumed requests (GenerationRequest::resumed_tokens): the one place that says what a request
// re-driven from its k-th generated token may look like, and the views of it the engine needs.
// The engine applies the meaning (sampler counter, penalties, stop strings, max_tokens, usage) in
// admit(), finish_reason() and its usage fields, through these helpers; see types.h for the rule.
//
// Invariant after validate_resumed(): 0 ≤ resumed_tokens < prompt_tokens.size(), resumed_tokens <
// max_tokens, and none of the resumed tokens would have finished the earlier attempt.
// Thread safety: pure functions (the tokenizer is a shared immutable handle).
#pragma once

#include <cstdint>
#include <span>

#include "core/status.h"
#include "engine/types.h"
#include "tokenizer/tokenizer.h"

namespace keel::engine {

// The prompt the client sent: prompt_tokens without the resumed tail.
[[nodiscard]] std::span<const int32_t> original_prompt(const GenerationRequest& request);
// The tokens an earlier attempt generated: the last resumed_tokens of prompt_tokens.
[[nodiscard]] std::span<const int32_t> resumed_span(const GenerationRequest& request);

// InvalidArgument unless resumed_tokens is in [0, prompt_tokens.size()) and below max_tokens, and
// no resumed token would have ended the earlier attempt: an end-of-generation id (unless
// ignore_eos), a stop token id, or the completion of a stop string (checked with `tokenizer` when
// the request has stop strings; null only when it has none). Token ids are checked elsewhere.
[[nodiscard]] Status validate_resumed(const GenerationRequest& request,
                                      std::span<const int32_t> eog_token_ids,
                                      const tokenizer::Tokenizer* tokenizer);

// Usage of a request: its prompt tokens served by the prefix cache, at most the original prompt
// (a resumed request may also find its resumed tokens cached; they are not prompt).
[[nodiscard]] int32_t usage_cached_tokens(const GenerationRequest& request, int32_t num_cached);

}  // namespace keel::engine
