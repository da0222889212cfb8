// Drafter: what speculative decoding asks of a draft source — given a sequence's known tokens
// (prompt then generated), propose up to `max_drafts` tokens that may follow. The verification
// step (sampling/draft_verify.h) decides which of them the target model keeps, so a drafter
// only affects speed, never the output.
// The methods are a closed set (SpecMethod), dispatched by draft_tokens(); each is a pure function
// of its inputs, so the scheduler calls it while planning and tests call it without a model. A
// method that runs a model (the draft head, the draft model) runs it beside the forward pass, on
// the executor thread, and hands its proposal in as `proposed`.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/speculative_params.h"

namespace keel::engine {

// Appends to *out (cleared first) at most min(params.k, max_drafts) proposed tokens following
// `tokens`; none for SpecMethod::kNone, max_drafts ≤ 0 or when the method has nothing to offer.
// `proposed`: what a model-based drafter (the draft head or the draft model, run by the step
// executor right after the step that produced tokens' last token) proposed after exactly these
// tokens; kDraftHead and kDraftModel take its first tokens, the other methods ignore it.
void draft_tokens(const SpeculativeParams& params, std::span<const int32_t> tokens,
                  std::span<const int32_t> proposed, int32_t max_drafts, std::vector<int32_t>* out);

}  // namespace keel::engine
