// Draft verification for speculative decoding: given the target model's logits at a sequence's
// last known token and at each of k drafted tokens (k + 1 rows, from one forward pass), decide
// which drafts the request keeps and the token that follows them.
//
// Rule: row i is sampled exactly as autoregressive decoding would sample it — the request's full
// Sampler pipeline (constraint, logit bias, penalties with the drafts accepted so far in the
// history, greedy argmax or temperature → top-k → top-p → min-p, draw i = f(seed, i)) — giving
// x_i. If i < k and x_i equals draft d_i, the draft is accepted and row i + 1 (computed with d_i
// in the context) is examined next; otherwise x_i is emitted as the corrected token (or, after k
// accepted drafts, the bonus token) and verification stops. So 1..k + 1 tokens come out per step.
//   Greedy: accept while d_i is the argmax; the tokens equal autoregressive decoding's.
//   Sampled: this is the standard rejection rule for a deterministic (one-hot) drafter. d_i is
//   accepted with probability p_i(d_i), p_i the processed target distribution; on rejection x_i
//   is distributed as p_i with d_i removed and renormalised (x_i conditioned on x_i ≠ d_i). The
//   output distribution is the target's, and since the draws are the counter-based ones, a seeded
//   request samples the very tokens it samples without speculation.
// Thread safety: as the Sampler's (one thread at a time per request).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace keel::sampling {

// rows: (drafts.size() + 1) × sampler.vocab_size() logits, row i at the position whose next token
// is drafts[i] (the last row follows the last draft); used as scratch. Appends the emitted tokens
// (with their logprobs when the params ask) to *out — accepted drafts, then one more — each
// already accept()ed into the sampler. Returns the number of drafts accepted (out gains it + 1).
int32_t verify_drafts(Sampler& sampler, std::span<float> rows, std::span<const int32_t> drafts,
                      std::vector<SampleOutput>* out);

}  // namespace keel::sampling
