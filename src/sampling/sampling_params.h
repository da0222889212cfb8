// SamplingParams: the per-request decoding parameters (OpenAI / vLLM semantics) and their
// validation. The server maps a failed validate() to HTTP 400; every message names the parameter
// (by its OpenAI/vLLM field name) and the offending value.
//
// Neutral values disable a stage: temperature 1, top_k 0 or -1, top_p 1, min_p 0,
// repetition_penalty 1, presence/frequency 0, empty logit_bias. The order in which the stages run
// is documented in sampling/sampler.h.
//
// Thread safety: a plain value.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"

namespace keel::sampling {

// Temperatures below this are treated as 0 (greedy), as vLLM does: dividing by a tiny temperature
// would overflow logits to infinity.
inline constexpr float kGreedyTemperature = 1e-5f;
// OpenAI's range for presence_penalty and frequency_penalty.
inline constexpr float kMaxAbsPresenceFrequencyPenalty = 2.0f;
// OpenAI's limit on top_logprobs (and vLLM's default max_logprobs).
inline constexpr int32_t kMaxLogprobs = 20;

// Which logits the returned logprobs describe.
enum class LogprobsSource {
  kRaw,        // the model's logits as given to the sampler (vLLM's default, "raw_logprobs")
  kProcessed,  // after logit_bias, penalties, temperature and truncation (vLLM
               // "processed_logprobs")
};

struct SamplingParams {
  // Softmax temperature; 0 (or anything below kGreedyTemperature) selects greedy decoding
  // (argmax, ties to the lowest token id). Must be finite and >= 0.
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 or -1 disables. Must be >= -1.
  int32_t top_k = 0;
  // Nucleus sampling: keep the smallest set of most likely tokens whose probability sums to at
  // least top_p. 1 disables. Must be in (0, 1].
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times that of the most likely token. 0 disables.
  // Must be in [0, 1].
  float min_p = 0.0f;
  // Multiplicative penalty on every token seen in the prompt or the output: positive logits are
  // divided by it, negative ones multiplied. 1 disables; > 1 discourages repetition. Must be > 0.
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that occurs in the generated output.
  // In [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted from a token's logit once per occurrence in the generated output. In [-2, 2].
  float frequency_penalty = 0.0f;
  // Additive biases (token id, bias) applied to the raw logits before anything else. Ids must be
  // in [0, vocab_size); a bias of -inf bans a token; a bias may not be NaN or +inf. Repeated ids
  // add up. (OpenAI limits biases to [-100, 100]; the server may enforce that, the sampler does
  // not.)
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Seed of the request's random generator: the same seed and the same logits give the same
  // tokens everywhere. nullopt: seeded from the operating system's entropy source.
  std::optional<uint64_t> seed;
  // Number of most likely alternatives to return with each sampled token's logprob (OpenAI
  // top_logprobs, vLLM logprobs). nullopt: no logprobs. Must be in [0, kMaxLogprobs].
  std::optional<int32_t> logprobs;
  // Which logits logprobs are computed from; raw by default, as in vLLM.
  LogprobsSource logprobs_source = LogprobsSource::kRaw;

  // True when temperature selects greedy decoding.
  [[nodiscard]] bool is_greedy() const { return temperature < kGreedyTemperature; }
  // True when any of the three penalties is not neutral.
  [[nodiscard]] bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }

  // Ok, or InvalidArgument naming the first out-of-range parameter and its value.
  [[nodiscard]] Status validate(int32_t vocab_size) const;
  friend bool operator==(const SamplingParams&, const SamplingParams&) = default;
};

}  // namespace keel::sampling
