// LengthHead: the trained classifier over length buckets. Features are standardised
// (z = (f − mean) · scale), then either softmax regression (hidden = 0: logits = W2·z + b2) or a
// one-hidden-layer MLP (h = relu(W1·z + b1), logits = W2·h + b2); probabilities = softmax(logits).
//
// Invariants (validate()): the buckets are valid; every vector has the size its comment gives and
// holds only finite numbers; scale > 0.
// Thread safety: plain data; the const methods may be called from any number of threads.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "predictor/buckets.h"

namespace keel::predictor {

struct LengthHead {
  LengthBuckets buckets;
  int64_t input_dim = 0;             // D, the feature vector's size
  int64_t hidden = 0;                // H, hidden units; 0 = softmax regression
  std::vector<float> feature_mean;   // [D]
  std::vector<float> feature_scale;  // [D] 1 / standard deviation
  std::vector<float> w1;             // [H][D] (empty when H = 0)
  std::vector<float> b1;             // [H]
  std::vector<float> w2;             // [B][H], or [B][D] when H = 0 (B = buckets.num_buckets())
  std::vector<float> b2;             // [B]

  // A head of zeros (uniform probabilities) with mean 0 and scale 1.
  static LengthHead zeros(LengthBuckets buckets, int64_t input_dim, int64_t hidden);

  [[nodiscard]] Status validate() const;
  [[nodiscard]] int64_t num_buckets() const { return buckets.num_buckets(); }
  // Size of the layer W2 reads: H, or D when H = 0.
  [[nodiscard]] int64_t last_dim() const { return hidden > 0 ? hidden : input_dim; }

  // z = standardised features ([D] each).
  void standardize(std::span<const float> features, std::span<float> z) const;
  // Logits [B] from standardised features; `h` ([H], may be empty when H = 0) receives the
  // hidden activations.
  void logits(std::span<const float> z, std::span<float> h, std::span<float> out) const;
  // Softmax probabilities [B] of raw features (sizes checked).
  [[nodiscard]] std::vector<float> probabilities(std::span<const float> features) const;
};

// In place: v ← softmax(v), computed with the maximum subtracted.
void softmax_in_place(std::span<float> v);

}  // namespace keel::predictor
