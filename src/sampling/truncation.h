// Truncation: top-k, top-p (nucleus) and min-p, applied in that order to temperature-scaled
// logits. Tokens removed are set to -inf in the logits, so after truncate() the span holds the
// processed logits that the token is drawn from.
//
// Invariant: candidates are ordered by ranks_before() (higher logit first, ties to the lower id), a
// strict total order, so the selected set and its order are the same with every standard library
// (nth_element and sort are not stable, but with a total order their results are unique).
// Thread safety: pure functions; the caller owns the scratch vector.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace keel::sampling {

struct Candidate {
  float logit = 0.0f;
  int32_t token_id = 0;
};

// Higher logit first; equal logits: lower token id first.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.token_id < b.token_id);
}

struct TruncationParams {
  int32_t top_k = 0;   // <= 0 or >= vocabulary: disabled
  float top_p = 1.0f;  // 1: disabled
  float min_p = 0.0f;  // 0: disabled
};

// Applies top-k → top-p → min-p to `logits` (temperature already applied, no NaN) whose largest
// value is `max_logit` (finite). top-p is computed on the distribution renormalised over the
// top-k survivors; min-p is relative to the most likely token, which survives every stage.
//
// Returns true when top-k or top-p ran: *candidates then holds exactly the surviving tokens in
// ranks_before order. Returns false when no list was built (only min-p, or nothing, was active):
// the survivors are the tokens whose logit is not -inf. Either way, removed tokens are -inf in
// `logits`.
//
// Cost: O(V) without top-k/top-p. top-k: O(V + k log k). top-p alone: selects growing prefixes
// (128, 512, 2048, ...) with nth_element until they hold probability mass >= top_p, then sorts only
// that prefix — no full sort of the vocabulary unless the nucleus is the whole of it.
bool truncate(std::span<float> logits, float max_logit, const TruncationParams& params,
              std::vector<Candidate>* candidates);

}  // namespace keel::sampling
