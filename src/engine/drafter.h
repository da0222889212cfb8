// Drafter: what speculative decoding asks of a draft source — given a sequence's known tokens
// (prompt then generated), propose up to `max_drafts` tokens that may follow. The verification
// step (sampling/draft_verify.h) decides which of them the target model keeps, so a drafter
// only affects speed, never the output.
// The methods are a closed set (SpecMethod), dispatched by draft_tokens(); each is a pure function
// of its inputs, so the scheduler calls it while planning and tests call it without a model.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/speculative_params.h"

namespace keel::engine {

// Appends to *out (cleared first) at most min(params.k, max_drafts) proposed tokens following
// `tokens`; none for SpecMethod::kNone, max_drafts ≤ 0 or when the method has nothing to offer.
void draft_tokens(const SpeculativeParams& params, std::span<const int32_t> tokens,
                  int32_t max_drafts, std::vector<int32_t>* out);

}  // namespace keel::engine
