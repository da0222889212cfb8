// Sampler: turns one sequence's logits into the next token, per request. It owns the request's
// validated SamplingParams, its seeded CounterRng and its TokenHistory (for the penalties). Scratch
// memory comes from a SamplingWorkspace: the Sampler's own (created on first use, reused across
// steps) or one lent by the caller, so that an engine with many requests keeps one per thread.
//
// Order of operations in sample(), each stage skipped when neutral:
//   0. constraint            a LogitConstraint (structured outputs) sets disallowed tokens to -inf
//   1. logit_bias            additive, on the raw logits
//   2. penalties             repetition (prompt + output), then presence / frequency (output)
//   3. greedy                if temperature < kGreedyTemperature (i.e. 0): argmax, ties → lowest id
//   4. temperature           logits / T
//   5. top-k → 6. top-p → 7. min-p
//   8. sample                one draw from softmax over the survivors
// Why this order (as in vLLM and HF): logit_bias and penalties express what the *request* wants
// (ban, force, discourage) and must hold for greedy decoding too, so they come before argmax; a
// bias is applied to the model's own scale, before penalties rescale it. Temperature comes before
// truncation because top-p and min-p are defined on the distribution that is actually sampled (T
// changes which tokens make up p of the mass; top-k is unaffected by T). top-p is computed on the
// distribution renormalised over the top-k survivors (HF/vLLM). min-p last: it is relative to the
// most likely token, which survives every earlier stage. (vLLM v1 runs min-p before top-k/top-p;
// results differ only when min-p removes tokens inside the top-p nucleus.)
//
// Reproducibility: the random stream is counter-based (CounterRng, sampling/counter_rng.h): the
// i-th sample() call of a request (i = 0 for its first generated token; resume() moves i on) uses
// the uniform draw CounterRng(seed).uniform(i) when it is not greedy — a pure function of
// (seed, i), whatever earlier calls drew or whether they were greedy. So a request re-driven on
// another engine as prompt + its first k generated tokens (resume()) samples token k exactly as
// the uninterrupted run did. The draw walks the survivors in a canonical order (token id order,
// or ranks_before order for top-k survivors); exp and the sums are keel's own fixed-order float
// arithmetic (softmax_math.h, no libm, no FMA contraction). So the same seed, logits and
// parameters give the same tokens on any thread, process or platform.
//
// Cost per step at a 152k vocabulary: a few O(V) vectorisable passes; no sort of the vocabulary
// (see truncation.h); no allocation after the first step.
//
// Thread safety: one Sampler per request, used by one thread at a time (the engine thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "core/result.h"
#include "sampling/counter_rng.h"
#include "sampling/logit_constraint.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"
#include "sampling/sampling_workspace.h"
#include "sampling/token_history.h"

namespace keel::sampling {

// A sampled token and, when SamplingParams::logprobs asked for them, its logprobs.
struct SampleOutput {
  int32_t token = 0;
  std::optional<Logprobs> logprobs;
};

class Sampler {
 public:
  // params must pass params.validate(vocab_size) (checked; aborts otherwise). Requests from
  // users go through create() instead.
  Sampler(const SamplingParams& params, int32_t vocab_size);
  // Validates params, then constructs.
  static Result<Sampler> create(const SamplingParams& params, int32_t vocab_size);

  // Records the prompt's tokens for the repetition penalty (replacing an earlier prompt). Ids must
  // be in [0, vocab_size) — the engine validates user-supplied token ids before they get here.
  void set_prompt(std::span<const int32_t> prompt_tokens);

  // Samples the next token from logits ([vocab_size]). The span is scratch: on return it holds the
  // processed logits — bias and penalties applied, and for non-greedy sampling also divided by the
  // temperature, with tokens removed by top-k/top-p/min-p set to -inf. Does not record the token:
  // call accept() once the engine keeps it. Uses the Sampler's own workspace.
  int32_t sample(std::span<float> logits);
  // The same with a borrowed workspace (same result; the workspace is only used during the call).
  int32_t sample(std::span<float> logits, SamplingWorkspace& workspace);

  // sample(), plus logprobs when params().logprobs is set: top params().logprobs alternatives,
  // from the raw logits (default; costs one copy of the logits into the workspace) or from the
  // processed ones, per params().logprobs_source.
  SampleOutput sample_with_logprobs(std::span<float> logits);
  SampleOutput sample_with_logprobs(std::span<float> logits, SamplingWorkspace& workspace);

  // Records a generated token for the penalties (and the constraint). Must be in [0, vocab_size).
  void accept(int32_t token);

  // Installs a constraint applied first in every sample() and fed every accept()ed (and
  // resume()d) token; set it before resume(). nullptr removes it.
  void set_constraint(std::unique_ptr<LogitConstraint> constraint) {
    constraint_ = std::move(constraint);
  }
  [[nodiscard]] LogitConstraint* constraint() const { return constraint_.get(); }

  // Takes over tokens an earlier attempt of this request generated (its first generated tokens,
  // in order), as if sample() had returned each and accept() had recorded it: they count as
  // output for the penalties, and the draw index moves on by their number, so the next sample()
  // is the one for generated token draw_index(). Ids must be in [0, vocab_size).
  void resume(std::span<const int32_t> generated_tokens);
  // The counter of the next sample() call: 0 for a request's first generated token.
  [[nodiscard]] uint64_t draw_index() const { return draw_index_; }

  [[nodiscard]] const SamplingParams& params() const { return params_; }
  [[nodiscard]] int32_t vocab_size() const { return vocab_size_; }
  // The seed in use (the drawn one when params().seed was nullopt), for logs and replays.
  [[nodiscard]] uint64_t seed() const { return rng_.seed(); }
  [[nodiscard]] const TokenHistory& history() const { return history_; }

 private:
  SamplingWorkspace& own_workspace();

  SamplingParams params_;
  int32_t vocab_size_;
  CounterRng rng_;
  uint64_t draw_index_ = 0;  // sample() calls so far, plus resumed tokens
  TokenHistory history_;
  std::unique_ptr<SamplingWorkspace> own_workspace_;  // created by the first sample() without one
  std::unique_ptr<LogitConstraint> constraint_;       // structured outputs, when set
};

}  // namespace keel::sampling
