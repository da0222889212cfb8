// Training a draft head (draft_head.h) on a DraftDataset: mini-batch Adam on
//   loss = cross-entropy(W_out·f', label) + feature_weight · mean_j (f'_j − f_{p+1,j})²
// per pair — the next token through the target's frozen LM head, plus EAGLE's regression of the
// predicted feature onto the target's own, which keeps the features the head feeds back to itself
// close to the ones it was trained on. Teacher forcing: every pair starts from the target's
// feature. Initial weights: fc_in passes f through (identity) plus small seeded noise, the MLP is
// seeded uniform, g is the target's output norm. Deterministic: a seeded keel Rng (init, the
// per-epoch shuffle), sums in a fixed order, one thread.
// Thread safety: pure functions (the model is only read).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"
#include "draft/draft_dataset.h"
#include "draft/draft_head.h"
#include "model/model.h"

namespace keel::draft {

struct DraftTrainConfig {
  int64_t hidden = 256;         // H
  int32_t epochs = 8;           // passes over the pairs
  int64_t max_steps = 0;        // stop after this many Adam steps; 0 = the epochs decide
  int32_t batch = 128;          // pairs per Adam step
  float learning_rate = 2e-3f;  // Adam
  float feature_weight = 0.1f;  // the feature regression term's weight
  uint64_t seed = 1;

  [[nodiscard]] Status validate() const;
};

struct DraftLoss {
  double loss = 0;  // mean over the pairs (cross-entropy + feature term)
  double cross_entropy = 0;
  double accuracy = 0;  // share of pairs whose argmax is the label
};

struct DraftTrainResult {
  DraftHeadWeights weights;
  DraftLoss before;               // of the initial weights, on the training pairs
  std::vector<DraftLoss> epochs;  // after each epoch (the last one may be cut by max_steps)
  int64_t steps = 0;
};

// Called after each epoch with (epoch index, its result).
using DraftTrainProgress = std::function<void(int32_t epoch, const DraftLoss& loss)>;

// The initial weights (see above) for `target`.
[[nodiscard]] DraftHeadWeights init_draft_head(const model::Model& target,
                                               const DraftTrainConfig& config);

// The loss of `weights` over `data`'s pairs (teacher forcing).
[[nodiscard]] DraftLoss evaluate_draft_head(const DraftHeadWeights& weights,
                                            const DraftDataset& data, const model::Model& target,
                                            float feature_weight);

// InvalidArgument for an empty dataset, a dataset of another width or a bad config.
[[nodiscard]] Result<DraftTrainResult> train_draft_head(const DraftDataset& data,
                                                        const model::Model& target,
                                                        const DraftTrainConfig& config,
                                                        const DraftTrainProgress& progress = {});

}  // namespace keel::draft
