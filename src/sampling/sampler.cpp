// Sampler: the per-request pipeline bias → penalties → greedy | temperature → top-k → top-p →
// min-p → draw (see sampler.h for the reasons behind the order).
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "sampling/logit_processors.h"

namespace keel::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

}  // namespace

Sampler::Sampler(const SamplingParams& params, int32_t vocab_size)
    : params_(params),
      vocab_size_(vocab_size),
      rng_(params.seed.has_value() ? *params.seed : random_seed()) {
  const Status status = params.validate(vocab_size);
  KEEL_CHECK_MSG(status.ok(), status.message().c_str());
}

Result<Sampler> Sampler::create(const SamplingParams& params, int32_t vocab_size) {
  KEEL_TRY(params.validate(vocab_size));
  return Sampler(params, vocab_size);
}

void Sampler::set_prompt(std::span<const int32_t> prompt_tokens) {
  for (int32_t id : prompt_tokens) KEEL_CHECK(id >= 0 && id < vocab_size_);
  history_.set_prompt(prompt_tokens);
}

void Sampler::accept(int32_t token) {
  KEEL_CHECK(token >= 0 && token < vocab_size_);
  history_.add_output(token);
}

int32_t Sampler::sample(std::span<float> logits) {
  KEEL_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  apply_logit_bias(logits, params_.logit_bias);
  apply_penalties(logits, history_, params_.repetition_penalty, params_.presence_penalty,
                  params_.frequency_penalty);
  if (params_.is_greedy()) return argmax(logits);

  const double u = rng_.next_double();  // exactly one draw per non-greedy step
  if (params_.temperature != 1.0f) {
    apply_temperature(logits, params_.temperature);
  } else {
    for (float& x : logits) x = std::isnan(x) ? -kInf : x;
  }
  const float max_logit = *std::max_element(logits.begin(), logits.end());
  // Nothing finite to sample from (all banned), or +inf logits: deterministic argmax.
  if (!std::isfinite(max_logit)) return argmax(logits);

  const TruncationParams truncation{params_.top_k, params_.top_p, params_.min_p};
  if (truncate(logits, max_logit, truncation, &candidates_)) {
    return draw(candidates_, max_logit, u);
  }
  return draw(logits, max_logit, u);
}

SampleOutput Sampler::sample_with_logprobs(std::span<float> logits) {
  if (!params_.logprobs.has_value()) return SampleOutput{sample(logits), std::nullopt};
  const int32_t top_n = *params_.logprobs;
  if (params_.logprobs_source == LogprobsSource::kRaw) {
    raw_logits_.assign(logits.begin(), logits.end());
    const int32_t token = sample(logits);
    return SampleOutput{token, compute_logprobs(raw_logits_, token, top_n)};
  }
  const int32_t token = sample(logits);
  return SampleOutput{token, compute_logprobs(logits, token, top_n)};
}

int32_t Sampler::draw(std::span<const Candidate> survivors, float max_logit, double u) {
  KEEL_CHECK(!survivors.empty());
  double total = 0.0;
  for (const Candidate& c : survivors) total += std::exp(c.logit - max_logit);
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last_possible = survivors.front().token_id;  // the most likely: weight 1
  for (const Candidate& c : survivors) {
    const float weight = std::exp(c.logit - max_logit);
    if (weight == 0.0f) continue;
    cumulative += weight;
    last_possible = c.token_id;
    if (cumulative > target) return c.token_id;
  }
  return last_possible;  // rounding left the sum just short of target
}

int32_t Sampler::draw(std::span<const float> logits, float max_logit, double u) {
  double total = 0.0;
  for (float x : logits) total += std::exp(x - max_logit);
  const double target = u * total;
  double cumulative = 0.0;
  size_t last_possible = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float weight = std::exp(logits[i] - max_logit);
    if (weight == 0.0f) continue;
    cumulative += weight;
    last_possible = i;
    if (cumulative > target) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_possible);  // rounding left the sum just short of target
}

}  // namespace keel::sampling
