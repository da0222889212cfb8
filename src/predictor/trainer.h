// Training a LengthHead: full-batch gradient descent with Adam on the mean cross-entropy of the
// bucket labels plus an L2 penalty on the weights (not the biases). Features are standardised
// with the training set's mean and standard deviation, which the head keeps. Deterministic: the
// MLP's initial weights come from a seeded keel Rng (He-uniform), the sums run in a fixed order,
// one thread.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "predictor/head.h"

namespace keel::predictor {

struct TrainConfig {
  int64_t hidden = 0;   // hidden units; 0 = softmax regression
  int32_t steps = 200;  // full-batch Adam steps
  float learning_rate = 0.01f;
  float weight_decay = 0.02f;  // λ of 0.5·λ·‖W‖²
  uint64_t seed = 1;           // initial weights of the MLP

  [[nodiscard]] Status validate() const;
};

struct TrainResult {
  LengthHead head;
  std::vector<float> loss;  // [steps + 1] training loss before each step and after the last
};

// features: [N][D] raw feature vectors; labels: [N] buckets in [0, buckets.num_buckets()).
// InvalidArgument for empty or ragged inputs or a label out of range.
Result<TrainResult> train_head(const std::vector<std::vector<float>>& features,
                               const std::vector<int32_t>& labels, const LengthBuckets& buckets,
                               const TrainConfig& config);

}  // namespace keel::predictor
