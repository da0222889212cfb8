// Logit processors: the stages of sampling that rewrite raw logits in place before any softmax —
// logit_bias and the repetition / presence / frequency penalties. Each is a plain function
// over a span of one sequence's logits ([vocab_size] floats); the Sampler calls them in the order
// documented in sampling/sampler.h. Exposed separately so they can be tested by exact amounts.
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>
#include <utility>

#include "sampling/token_history.h"

namespace keel::sampling {

// logits[id] += bias for every (id, bias). Ids must be in range (SamplingParams::validate).
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);

// Penalties over a request's history (llama.cpp / vLLM / HF / OpenAI semantics):
//  1. repetition (multiplicative), over every id seen in the prompt or the output:
//       logit > 0 ? logit / repetition : logit * repetition
//  2. presence and frequency (additive, OpenAI), over ids in the generated output only:
//       logit -= presence * [count > 0] + frequency * count
// Neutral values (1, 0, 0) leave the logits untouched. Cost: O(distinct ids in the history).
void apply_penalties(std::span<float> logits, const TokenHistory& history, float repetition,
                     float presence, float frequency);

}  // namespace keel::sampling
