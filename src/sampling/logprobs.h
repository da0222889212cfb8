// Logprobs: log-probabilities of a chosen token and of the N most likely tokens under
// softmax(logits), computed with a log-sum-exp (max-shifted, accumulated in double) so large or
// very negative logits neither overflow nor lose the small probabilities.
//
// Which logits to pass is the caller's choice (raw model logits by default, as vLLM; see
// LogprobsSource in sampling_params.h and Sampler::sample_with_logprobs). NaN logits count as -inf.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/truncation.h"

namespace keel::sampling {

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0.0f;  // natural log; -inf for impossible tokens
  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct Logprobs {
  TokenLogprob chosen;            // the sampled token
  int32_t chosen_rank = 0;        // 1 + number of tokens strictly more likely (vLLM's rank)
  std::vector<TokenLogprob> top;  // the top_n most likely tokens, descending, ties by lower id
  friend bool operator==(const Logprobs&, const Logprobs&) = default;
};

// log(sum_i exp(logits[i])), ignoring NaN. -inf when every entry is -inf (or NaN); +inf when some
// entry is +inf.
double log_sum_exp(std::span<const float> logits);

// KL(softmax(p_logits) ‖ softmax(q_logits)) in nats (≥ 0; the rows have the same length). For
// comparing an approximate method's next-token distribution with the exact one.
double kl_divergence(std::span<const float> p_logits, std::span<const float> q_logits);

// The logprob of `chosen` and the top_n most likely tokens of softmax(logits). chosen must be in
// [0, logits.size()); top_n >= 0 (clamped to the vocabulary size). Cost: O(V) plus, for top_n
// <= 32, O(top_n) per entry that enters the running top list; larger top_n use nth_element.
// If some logits are +inf, those tokens share all the probability (each gets -log(count)).
Logprobs compute_logprobs(std::span<const float> logits, int32_t chosen, int32_t top_n);

// The top_n entries of logits by ranks_before (higher logit first, ties to the lower id; NaN
// ranks last), best first; top_n larger than the vocabulary gives every entry. Same cost as above.
std::vector<Candidate> top_candidates(std::span<const float> logits, size_t top_n);

}  // namespace keel::sampling
