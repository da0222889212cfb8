// Sampler: the per-request pipeline bias → penalties → greedy | temperature → top-k → top-p →
// min-p → draw (see sampler.h for the reasons behind the order).
#include "sampling/sampler.h"

#include <cmath>

#include "core/check.h"
#include "sampling/logit_processors.h"
#include "sampling/rng.h"
#include "sampling/softmax_math.h"
#include "sampling/truncation.h"

namespace keel::sampling {

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
  if (constraint_) constraint_->accept(token);
}

void Sampler::resume(std::span<const int32_t> generated_tokens) {
  for (int32_t id : generated_tokens) accept(id);
  draw_index_ += generated_tokens.size();
}

SamplingWorkspace& Sampler::own_workspace() {
  if (!own_workspace_) own_workspace_ = std::make_unique<SamplingWorkspace>();
  return *own_workspace_;
}

int32_t Sampler::sample(std::span<float> logits) { return sample(logits, own_workspace()); }

SampleOutput Sampler::sample_with_logprobs(std::span<float> logits) {
  return sample_with_logprobs(logits, own_workspace());
}

namespace {

// Softmax draw over the top-k survivors (ranks_before order) with uniform u in [0, 1).
int32_t draw_from_survivors(std::span<const Candidate> survivors, std::span<const float> weights,
                            double u) {
  KEEL_CHECK(!survivors.empty());
  auto weight = [&](const Candidate& c) { return weights[static_cast<size_t>(c.token_id)]; };
  double total = 0.0;
  for (const Candidate& c : survivors) total += static_cast<double>(weight(c));
  const double target = u * total;
  double cumulative = 0.0;
  int32_t last_possible = survivors.front().token_id;  // the most likely: weight 1
  for (const Candidate& c : survivors) {
    if (weight(c) == 0.0f) continue;
    cumulative += static_cast<double>(weight(c));
    last_possible = c.token_id;
    if (cumulative > target) return c.token_id;
  }
  return last_possible;  // rounding left the sum just short of target
}

}  // namespace

int32_t Sampler::sample(std::span<float> logits, SamplingWorkspace& ws) {
  KEEL_CHECK(logits.size() == static_cast<size_t>(vocab_size_));
  const uint64_t draw_index = draw_index_++;  // every call, greedy or not, is one generated token
  if (constraint_) constraint_->mask(logits);
  apply_logit_bias(logits, params_.logit_bias);
  apply_penalties(logits, history_, params_.repetition_penalty, params_.presence_penalty,
                  params_.frequency_penalty);
  if (params_.is_greedy()) return argmax(logits);

  const double u = rng_.uniform(draw_index);
  const float max_logit = prepare_logits(logits, params_.temperature);
  // Nothing finite to sample from (everything banned), or +inf logits: deterministic argmax.
  if (!std::isfinite(max_logit)) return argmax(logits);

  ws.weights.resize(logits.size());
  const TruncationParams truncation{params_.top_k, params_.top_p, params_.min_p};
  if (ws.truncator.apply(logits, ws.weights, max_logit, truncation)) {
    return draw_from_survivors(ws.truncator.survivors(), ws.weights, u);
  }
  ws.block_sums.resize((logits.size() + kWeightBlockSize - 1) / kWeightBlockSize);
  const double total = sum_weight_blocks(ws.weights, ws.block_sums);
  return pick_weighted(ws.weights, ws.block_sums, u * total);
}

SampleOutput Sampler::sample_with_logprobs(std::span<float> logits, SamplingWorkspace& ws) {
  if (!params_.logprobs.has_value()) return SampleOutput{sample(logits, ws), std::nullopt};
  const int32_t top_n = *params_.logprobs;
  if (params_.logprobs_source == LogprobsSource::kRaw) {
    ws.raw_logits.assign(logits.begin(), logits.end());
    const int32_t token = sample(logits, ws);
    return SampleOutput{token, compute_logprobs(ws.raw_logits, token, top_n)};
  }
  const int32_t token = sample(logits, ws);
  return SampleOutput{token, compute_logprobs(logits, token, top_n)};
}

}  // namespace keel::sampling
