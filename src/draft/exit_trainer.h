// Training SpecEE's exit predictors (exit_predictor.h) on an ExitDataset: per layer an independent
// MLP 12 → H (ReLU) → 1 (sigmoid), binary cross-entropy, mini-batch Adam (the paper's recipe:
// lr 1e-3, an 80/20 split of the tokens). Then the calibration: a pass over every training token
// with predictors at every layer (exit at the first layer whose P > 0.5 and whose argmax is a
// candidate) gives the exit histogram the offline layer ranking reads. Deterministic: a seeded
// keel Rng (init, split, per-epoch shuffle), sums in a fixed order, one thread.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"
#include "draft/exit_dataset.h"
#include "draft/exit_predictor.h"

namespace keel::draft {

struct ExitTrainConfig {
  int64_t hidden = 512;         // H (the paper: 512)
  int32_t epochs = 20;          // passes over each layer's training tokens
  int64_t max_steps = 0;        // Adam steps per layer at most; 0 = the epochs decide
  int32_t batch = 256;          // tokens per Adam step
  float learning_rate = 1e-3f;  // Adam
  float holdout = 0.2f;         // share of tokens held out for the accuracy
  uint64_t seed = 1;

  [[nodiscard]] Status validate() const;
};

struct ExitLayerStats {
  double loss_before = 0;    // mean BCE on the training tokens, initial weights
  double loss = 0;           // ... after training
  double accuracy = 0;       // held-out share where (P > 0.5) equals the label
  double positive_rate = 0;  // held-out share of label 1 (the trivial predictor's yardstick)
  int64_t num_train = 0, num_test = 0;
};

struct ExitTrainResult {
  ExitPredictors predictors;           // exit_counts filled by the calibration pass
  std::vector<ExitLayerStats> layers;  // [n_layer − 1]
  int64_t steps = 0;                   // Adam steps, all layers
};

using ExitTrainProgress = std::function<void(int64_t layer, const ExitLayerStats& stats)>;

// InvalidArgument for an empty dataset or a bad config.
[[nodiscard]] Result<ExitTrainResult> train_exit_predictors(const ExitDataset& data,
                                                            const ExitTrainConfig& config,
                                                            const ExitTrainProgress& progress = {});

// Mean BCE of layer `layer`'s predictor over data.layers[layer].
[[nodiscard]] double exit_loss(const ExitPredictors& p, const ExitDataset& data, int64_t layer);

// Untrained predictors of the right shape: every layer's MLP at the trainer's seeded initial
// weights (uniform, ±1/√fan-in; biases 0), an all-zero histogram. For cost measurements at a
// model shape that has no trained predictors (keel bench --exit-predictors random): nothing says
// such weights predict anything.
[[nodiscard]] ExitPredictors random_exit_predictors(int64_t n_layer, int64_t hidden, uint64_t seed);

// The calibration histogram (see above) of `p` over every token of `data`.
[[nodiscard]] std::vector<int64_t> calibrate_exits(const ExitPredictors& p,
                                                   const ExitDataset& data);

}  // namespace keel::draft
