// Held-out metrics of a length predictor against the majority-bucket baseline: accuracy, mean
// absolute error in tokens (a prediction counts as its bucket's midpoint), and the confusion
// matrix of actual vs. predicted buckets.
//
// Thread safety: plain data and pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "predictor/buckets.h"

namespace keel::predictor {

struct LengthMetrics {
  int64_t count = 0;
  double accuracy = 0;           // predicted bucket == actual bucket
  double baseline_accuracy = 0;  // the majority bucket == actual bucket
  double mae_tokens = 0;         // |midpoint(predicted) − actual tokens|
  double baseline_mae_tokens = 0;
  std::vector<std::vector<int64_t>> confusion;  // [actual bucket][predicted bucket] counts
};

// actual_tokens[i] generated, predicted_buckets[i] predicted; equal sizes.
LengthMetrics length_metrics(const LengthBuckets& buckets,
                             const std::vector<int32_t>& actual_tokens,
                             const std::vector<int32_t>& predicted_buckets,
                             int32_t majority_bucket);

// The most frequent bucket of `tokens` (lowest on ties; 0 when empty).
int32_t majority_bucket(const LengthBuckets& buckets, const std::vector<int32_t>& tokens);

}  // namespace keel::predictor
