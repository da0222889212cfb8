// Truncation: top-k, top-p (nucleus) and min-p, applied in that order to temperature-scaled
// logits. Removed tokens become -inf in the logits (and 0 in the weights), so afterwards the
// logits are the processed logits the token is drawn from.
//
// Selection never sorts the vocabulary: one pass builds a histogram of the finite logits by their
// distance below the maximum (buckets 1/32 logit wide), which locates the bucket where the k-th
// token or the top_p mass boundary falls; only that bucket is sorted. Cost O(V) plus sorting one
// bucket (and, for top-k, the k survivors).
//
// Invariant: "better" is ranks_before() (higher logit first, ties to the lower id), a strict total
// order, so the surviving set and the survivors' order are unique — the same with every standard
// library. Thread safety: a Truncator is scratch inside a SamplingWorkspace; one apply() at a time.
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
  int32_t top_k = 0;   // <= 0, or >= the number of finite logits: disabled
  float top_p = 1.0f;  // 1: disabled
  float min_p = 0.0f;  // 0: disabled
};

class Truncator {
 public:
  // Applies top-k → top-p → min-p. logits must be NaN-free with finite maximum max_logit.
  // On return weights ([vocab], scratch) holds exp(logit - max_logit) (compute_weights in
  // softmax_math.h) for the survivors and 0 for removed tokens. top-p is computed on the
  // distribution renormalised over the top-k survivors; min-p keeps tokens whose probability is at
  // least min_p times the most likely one's (weight >= min_p), the most likely token surviving
  // every stage.
  //
  // Returns true when top-k ran: survivors() then lists exactly the surviving tokens, in
  // ranks_before order. Returns false otherwise (no list is built; survivors are the tokens whose
  // weight is non-zero).
  bool apply(std::span<float> logits, std::span<float> weights, float max_logit,
             const TruncationParams& params);

  // The survivors after an apply() that returned true.
  [[nodiscard]] std::span<const Candidate> survivors() const { return survivors_; }

 private:
  void compute_keys(std::span<const float> logits, float max_logit);
  void build_counts();
  void build_masses(std::span<const float> weights);
  void select_top_k(std::span<const float> logits, size_t k);
  void keep_nucleus_of_survivors(float max_logit, float top_p);
  void apply_dense_top_p(std::span<float> logits, std::span<float> weights, float top_p);

  std::vector<uint16_t> keys_;        // [vocab] bucket of each token; kNumBuckets for -inf
  std::vector<uint32_t> counts_;      // finite tokens per bucket (+ the excluded count)
  std::vector<double> masses_;        // sum of weights per bucket (dense top-p only)
  size_t num_finite_ = 0;             // finite logits
  std::vector<Candidate> bucket_;     // the tokens of the boundary bucket
  std::vector<Candidate> survivors_;  // top-k survivors, ranks_before order
};

}  // namespace keel::sampling
