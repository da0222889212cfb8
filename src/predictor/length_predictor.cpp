// LengthPredictor (see length_predictor.h).
#include "predictor/length_predictor.h"

#include <algorithm>
#include <string>

namespace keel::predictor {
namespace {

Status check_match(const PredictorFile& file, const model::Model& m) {
  const model::HParams& hp = m.hparams();
  if (hp.n_embd != file.feature_n_embd || hp.n_vocab != file.feature_n_vocab) {
    return Status::invalid_argument(
        "the predictor was trained on a side model with n_embd " +
        std::to_string(file.feature_n_embd) + " and " + std::to_string(file.feature_n_vocab) +
        " tokens (" + file.feature_model + "), not this one (n_embd " + std::to_string(hp.n_embd) +
        ", " + std::to_string(hp.n_vocab) + " tokens)");
  }
  return file.head.validate();
}

}  // namespace

Result<std::unique_ptr<LengthPredictor>> LengthPredictor::load(
    const std::string& predictor_path, const std::string& feature_model_path, kernels::Isa isa) {
  KEEL_ASSIGN_OR_RETURN(PredictorFile file, load_predictor(predictor_path));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<model::Model> m, model::Model::open(feature_model_path));
  KEEL_TRY(check_match(file, *m));
  const model::Model& ref = *m;
  return std::unique_ptr<LengthPredictor>(
      new LengthPredictor(std::move(file), std::move(m), ref, isa));
}

Result<std::unique_ptr<LengthPredictor>> LengthPredictor::create(PredictorFile file,
                                                                 const model::Model& feature_model,
                                                                 kernels::Isa isa) {
  KEEL_TRY(check_match(file, feature_model));
  return std::unique_ptr<LengthPredictor>(
      new LengthPredictor(std::move(file), nullptr, feature_model, isa));
}

LengthPrediction LengthPredictor::predict_features(std::span<const float> features) const {
  LengthPrediction p;
  p.probabilities = file_.head.probabilities(features);
  p.bucket = static_cast<int32_t>(std::max_element(p.probabilities.begin(), p.probabilities.end()) -
                                  p.probabilities.begin());
  p.predicted_tokens = buckets().midpoint(p.bucket);
  return p;
}

Result<LengthPrediction> LengthPredictor::predict(std::span<const int32_t> prompt) const {
  KEEL_ASSIGN_OR_RETURN(std::vector<float> f, extractor_.extract(prompt));
  return predict_features(f);
}

}  // namespace keel::predictor
