// LengthPredictor: what a job executor asks before routing — how many tokens will the served
// model generate for this prompt? Side-model features (features.h) feed the trained head
// (head.h); the answer is the most likely bucket, its midpoint and every bucket's probability.
// Data flow of predict(): prompt tokens → FeatureExtractor::extract (one forward pass of the side
// model, final normed hidden states) → standardise → head → softmax → argmax.
//
// Thread safety: predict() is const and keeps its scratch per call (see features.h); any number
// of threads may call it at once. Immutable after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "predictor/features.h"
#include "predictor/predictor_file.h"

namespace keel::predictor {

struct LengthPrediction {
  int32_t bucket = 0;                // argmax of probabilities (lowest bucket on ties)
  int32_t predicted_tokens = 0;      // the bucket's midpoint
  std::vector<float> probabilities;  // [num_buckets], summing to 1
};

class LengthPredictor {
 public:
  // Loads the predictor file and its side model (the GGUF it was trained on, e.g.
  // stories260K.gguf). InvalidArgument when the file is malformed or the side model's n_embd or
  // vocabulary differ from the file's; the reader's errors for unreadable paths.
  static Result<std::unique_ptr<LengthPredictor>> load(const std::string& predictor_path,
                                                       const std::string& feature_model_path,
                                                       kernels::Isa isa);
  // Over a side model the caller keeps alive (training and evaluation). Same checks.
  static Result<std::unique_ptr<LengthPredictor>> create(PredictorFile file,
                                                         const model::Model& feature_model,
                                                         kernels::Isa isa);

  // InvalidArgument for an empty prompt or a token outside the side model's vocabulary.
  [[nodiscard]] Result<LengthPrediction> predict(std::span<const int32_t> prompt) const;
  // The head alone, over features from features().
  [[nodiscard]] LengthPrediction predict_features(std::span<const float> features) const;

  [[nodiscard]] const PredictorFile& file() const { return file_; }
  [[nodiscard]] const LengthBuckets& buckets() const { return file_.head.buckets; }
  [[nodiscard]] const FeatureExtractor& features() const { return extractor_; }

 private:
  LengthPredictor(PredictorFile file, std::unique_ptr<model::Model> owned,
                  const model::Model& model, kernels::Isa isa)
      : file_(std::move(file)), owned_(std::move(owned)), extractor_(model, isa) {}

  PredictorFile file_;
  std::unique_ptr<model::Model> owned_;  // the side model when load() opened it
  FeatureExtractor extractor_;
};

}  // namespace keel::predictor
