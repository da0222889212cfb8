// ExitPredictors, the feature row and ExitEvaluator (see exit_predictor.h).
#include "draft/exit_predictor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/check.h"
#include "core/index_cast.h"
#include "kernels/weight_layout.h"

namespace keel::draft {
namespace {

Status check(const std::string& name, const std::vector<float>& v, int64_t want) {
  if (v.size() != sz(want)) {
    return Status::invalid_argument("exit predictor " + name + " has " + std::to_string(v.size()) +
                                    " values, not " + std::to_string(want));
  }
  for (float x : v) {
    if (!std::isfinite(x)) {
      return Status::invalid_argument("exit predictor " + name + " holds a non-finite value");
    }
  }
  return Status();
}

// Σ a[j]·b[j] over b's length, in 16 independent partial sums so the compiler vectorizes it.
float dot(const float* a, const std::vector<float>& b) {
  constexpr size_t kLanes = 16;
  std::array<float, kLanes> acc{};
  const size_t n = b.size(), whole = n / kLanes * kLanes;
  for (size_t j = 0; j < whole; j += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) acc[l] += a[j + l] * b[j + l];
  }
  float s = 0.0f;
  for (size_t j = whole; j < n; ++j) s += a[j] * b[j];
  for (float x : acc) s += x;
  return s;
}

}  // namespace

Status ExitPredictors::validate() const {
  if (n_layer < 2 || n_layer > 4096) {
    return Status::invalid_argument("exit predictors need a model of 2..4096 layers, not " +
                                    std::to_string(n_layer));
  }
  if (hidden < 1 || hidden > kMaxExitHidden) {
    return Status::invalid_argument("exit predictor hidden size " + std::to_string(hidden) +
                                    " is outside [1, " + std::to_string(kMaxExitHidden) + "]");
  }
  if (static_cast<int64_t>(layers.size()) != n_layer - 1) {
    return Status::invalid_argument("exit predictors: " + std::to_string(layers.size()) +
                                    " layers, the model needs " + std::to_string(n_layer - 1));
  }
  if (static_cast<int64_t>(exit_counts.size()) != n_layer) {
    return Status::invalid_argument("exit histogram has " + std::to_string(exit_counts.size()) +
                                    " layers, not " + std::to_string(n_layer));
  }
  for (int64_t c : exit_counts) {
    if (c < 0) return Status::invalid_argument("exit histogram has a negative count");
  }
  for (size_t l = 0; l < layers.size(); ++l) {
    const std::string at = "layer " + std::to_string(l) + " ";
    KEEL_TRY(check(at + "w1", layers[l].w1, hidden * kExitFeatures));
    KEEL_TRY(check(at + "b1", layers[l].b1, hidden));
    KEEL_TRY(check(at + "w2", layers[l].w2, hidden));
    if (!std::isfinite(layers[l].b2)) {
      return Status::invalid_argument("exit predictor " + at + "b2 is not finite");
    }
  }
  return Status();
}

float ExitPredictors::predict(int64_t layer, const ExitFeatureRow& f) const {
  const LayerExitPredictor& p = layers[sz(layer)];
  float out = p.b2;
  for (int64_t j = 0; j < hidden; ++j) {
    const float* w = p.w1.data() + j * kExitFeatures;
    float a = p.b1[sz(j)];
    for (int32_t i = 0; i < kExitFeatures; ++i) a += w[i] * f[sz(i)];
    if (a > 0.0f) out += p.w2[sz(j)] * a;
  }
  return 1.0f / (1.0f + std::exp(-out));
}

ExitFeatureRow exit_features(std::span<const float, kExitCandidates> logits, const float* prev,
                             std::array<float, kExitCandidates>* probs) {
  const float top = *std::max_element(logits.begin(), logits.end());
  float total = 0.0f;
  for (int32_t i = 0; i < kExitCandidates; ++i) {
    (*probs)[sz(i)] = std::exp(logits[sz(i)] - top);
    total += (*probs)[sz(i)];
  }
  ExitFeatureRow f{};
  for (int32_t i = 0; i < kExitCandidates; ++i) {
    (*probs)[sz(i)] /= total;
    f[sz(i)] = logits[sz(i)];
    f[sz(kExitCandidates + i)] = (*probs)[sz(i)];
    f[sz(2 * kExitCandidates + i)] = prev != nullptr ? (*probs)[sz(i)] - prev[i] : (*probs)[sz(i)];
  }
  return f;
}

ExitEvaluator::ExitEvaluator(const ExitPredictors& predictors, const model::Model& target,
                             float threshold)
    : p_(predictors), target_(target), threshold_(threshold) {
  KEEL_CHECK(predictors.n_layer == target.hparams().n_layer);
}

void ExitEvaluator::begin(std::span<const int32_t> candidates) {
  KEEL_CHECK(!candidates.empty());
  const auto d = sz(target_.hparams().n_embd);
  rows_.resize(kExitCandidates * d);
  for (int32_t i = 0; i < kExitCandidates; ++i) {
    cand_[sz(i)] = candidates[std::min(sz(i), candidates.size() - 1)];
    kernels::dequantize_matrix_row(target_.weights().output, cand_[sz(i)], rows_.data() + i * d);
  }
  has_prev_ = false;
}

bool ExitEvaluator::at_layer(int64_t layer, std::span<const float> residual, kernels::Ops& ops) {
  const model::HParams& hp = target_.hparams();
  KEEL_CHECK(layer >= 0 && layer < hp.n_layer - 1);
  const auto d = sz(hp.n_embd);
  normed_.resize(d);
  ops.rms_norm(residual.data(), target_.weights().output_norm.data(), 1, hp.n_embd, hp.rms_eps,
               normed_.data());
  std::array<float, kExitCandidates> z{};
  for (int32_t i = 0; i < kExitCandidates; ++i) z[sz(i)] = dot(rows_.data() + i * d, normed_);
  std::array<float, kExitCandidates> probs{};
  const ExitFeatureRow f = exit_features(z, has_prev_ ? prev_.data() : nullptr, &probs);
  prev_ = probs;
  has_prev_ = true;
  ++num_evaluated_;
  if (!(p_.predict(layer, f) > threshold_)) return false;
  ++num_predicted_;
  logits_.resize(sz(hp.n_vocab));  // verification: the full LM head at this layer
  ops.matmul(target_.weights().output, normed_.data(), 1, logits_.data());
  const auto top =
      static_cast<int32_t>(std::max_element(logits_.begin(), logits_.end()) - logits_.begin());
  return std::find(cand_.begin(), cand_.end(), top) != cand_.end();
}

}  // namespace keel::draft
