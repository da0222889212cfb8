// FeatureExtractor: a prompt's features for the length predictor, from a small side model (e.g.
// stories260K) — never a prefill of the served model. One forward pass of the side model over the
// prompt keeps the final hidden state after the output norm of every position
// (model::Context::forward_hidden); the feature vector is
//   [ mean over positions (n_embd) | last position's (n_embd) | log(1 + prompt tokens) ]
// (A mean over the last 16 positions as a third part was tried and changed nothing held out.)
// A prompt longer than the side model's context is cut to its last n_ctx tokens (the end of a
// prompt says most about what follows); its length feature still counts every token.
//
// Thread safety: extract() is const and builds its own scratch per call (a one-thread pool, the
// kernel table, a Context and KV blocks for the prompt), so any number of threads may call it at
// once. The Model is borrowed and must outlive the extractor.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/cpu_features.h"
#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::predictor {

class FeatureExtractor {
 public:
  FeatureExtractor(const model::Model& model, kernels::Isa isa);

  // Features of a side model with `n_embd`: 2·n_embd + 1.
  static int64_t dim_for(int64_t n_embd) { return 2 * n_embd + 1; }
  [[nodiscard]] int64_t dim() const { return dim_for(model_.hparams().n_embd); }
  [[nodiscard]] const model::Model& model() const { return model_; }

  // [dim()] features of `prompt` (token ids of the side model's vocabulary, BOS included as the
  // served model sees it). InvalidArgument for an empty prompt or a token outside the vocabulary.
  [[nodiscard]] Result<std::vector<float>> extract(std::span<const int32_t> prompt) const;

 private:
  const model::Model& model_;
  kernels::Isa isa_;
  CpuFeatures cpu_;
};

}  // namespace keel::predictor
