// SpecEE's per-layer exit predictors (docs/speculative.md): for a token in flight, the draft
// head's top-4 candidate tokens c_1..c_4 and the residual h_l after layer l,
//   z_l = final-norm(h_l) · W_out[c_i]   (4 logits: the candidates' rows of the target's LM head)
//   p_l = softmax(z_l)                    (4)
//   Δ_l = p_l − p_prev                    (4; p_prev: the previous evaluated layer's p, or p_l
//                                          again at the first evaluated layer)
//   features = [z_l; p_l; Δ_l] (12) → MLP 12 → 512 (ReLU) → 1 (sigmoid) = P(exit at l)
// The token exits when P > threshold (0.5) and the full LM head's argmax at that layer is one of
// the candidates (verification). One predictor per layer 0..n_layer−2 (the last layer is full
// depth and needs none).
// Invariants (validate()): n_layer ≥ 2, layers.size() = n_layer − 1, every vector the size its
// comment gives, all finite. Thread safety: ExitPredictors is immutable plain data; an
// ExitEvaluator is one token's state, used by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/kernels.h"
#include "model/model.h"

namespace keel::draft {

inline constexpr int32_t kExitCandidates = 4;                  // the speculative LM head's rows
inline constexpr int32_t kExitFeatures = 3 * kExitCandidates;  // 12
inline constexpr int64_t kMaxExitHidden = 1 << 14;

using ExitFeatureRow = std::array<float, kExitFeatures>;

struct LayerExitPredictor {
  std::vector<float> w1;  // [hidden][12] row-major
  std::vector<float> b1;  // [hidden]
  std::vector<float> w2;  // [hidden]
  float b2 = 0.0f;
};

struct ExitPredictors {
  int64_t n_layer = 0;
  int64_t hidden = 512;
  std::vector<LayerExitPredictor> layers;  // [n_layer − 1]
  // Calibration: per layer, how many training tokens a pass with predictors at every layer ended
  // at (the last layer: those that never exited) — the offline ranking's input
  // (engine/exit_layer_schedule.h).
  std::vector<int64_t> exit_counts;  // [n_layer]

  [[nodiscard]] Status validate() const;
  // P(exit) of layer l's predictor for `features`.
  [[nodiscard]] float predict(int64_t layer, const ExitFeatureRow& features) const;
};

// The 12 features from the candidates' 4 logits and the previous evaluated layer's
// probabilities (null at the first evaluated layer); *probs receives this layer's softmax.
ExitFeatureRow exit_features(std::span<const float, kExitCandidates> logits, const float* prev,
                             std::array<float, kExitCandidates>* probs);

// One token's exit decisions across its layers: begin() with the candidates, then at_layer() after
// each layer the schedule activates, in layer order.
class ExitEvaluator {
 public:
  // `predictors` and `target` must outlive the evaluator; threshold: exit when P > it (0.5; above 1
  // never predicts an exit, below 0 always does — verification still decides).
  ExitEvaluator(const ExitPredictors& predictors, const model::Model& target, float threshold);

  // The token's candidates (1..4 distinct ids; fewer than 4 pad the features with the last one).
  void begin(std::span<const int32_t> candidates);
  // After layer `layer` with the token's residual row: true when the token exits here (predicted
  // and verified).
  bool at_layer(int64_t layer, std::span<const float> residual, kernels::Ops& ops);

  [[nodiscard]] int64_t num_predicted() const { return num_predicted_; }  // P > threshold
  [[nodiscard]] int64_t num_evaluated() const { return num_evaluated_; }  // predictor runs

 private:
  const ExitPredictors& p_;
  const model::Model& target_;
  float threshold_;
  std::array<int32_t, kExitCandidates> cand_{};
  std::vector<float> rows_;  // [4][n_embd] the candidates' LM-head rows, dequantized
  std::vector<float> normed_, logits_;
  std::array<float, kExitCandidates> prev_{};
  bool has_prev_ = false;
  int64_t num_predicted_ = 0, num_evaluated_ = 0;
};

}  // namespace keel::draft
