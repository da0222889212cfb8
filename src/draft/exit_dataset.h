// The exit predictors' training data: the target's own text, each token fed one at a time (as
// decoding does), with per layer the 12 SpecEE features (exit_predictor.h) of the draft head's
// top-4 candidates and the label "this layer's LM-head argmax equals the final layer's". Sequences
// are generated as the draft head's data (draft_dataset.h: BOS, a sampled prefix, then a greedy
// continuation — every sequence greedy here, `temperature` is ignored) from a DraftDataSpec;
// `tokens` counts the positions recorded (every position after the first: the head needs the
// previous position's feature). Features use Δ between consecutive layers (every layer evaluated,
// as in the calibration run). Deterministic for a given spec, model and head.
// Thread safety: borrows the model, head and ops; one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "core/result.h"
#include "draft/draft_dataset.h"
#include "draft/draft_head.h"
#include "draft/exit_predictor.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::draft {

struct ExitSample {
  ExitFeatureRow features{};
  uint8_t label = 0;     // 1: the layer's argmax is the final token
  uint8_t verified = 0;  // 1: the layer's argmax is one of the candidates (verification passes)
};

struct ExitDataset {
  int64_t n_layer = 0;
  // [n_layer − 1][tokens]: sample i of every layer belongs to the same token.
  std::vector<std::vector<ExitSample>> layers;
  int64_t num_sequences = 0;
  [[nodiscard]] int64_t num_tokens() const {
    return layers.empty() ? 0 : static_cast<int64_t>(layers[0].size());
  }
};

using ExitDataProgress = std::function<void(int64_t done, int64_t total)>;

[[nodiscard]] Result<ExitDataset> build_exit_dataset(const model::Model& model,
                                                     const DraftHead& head,
                                                     const DraftDataSpec& spec, kernels::Ops& ops,
                                                     const ExitDataProgress& progress = {});

}  // namespace keel::draft
