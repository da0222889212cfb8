// AdamW for the LoRA parameters: Adam with bias correction and decoupled weight decay
// (Loshchilov & Hutter: p ← p − lr·(m̂ / (sqrt(v̂) + eps) + wd·p)), a learning-rate schedule of
// linear warm-up then linear or cosine decay (or constant), and clipping of the gradient's global
// L2 norm before the update.
//
// Determinism: the norm is summed in double in index order and each parameter's update reads only
// its own state, so a step gives the same bits on any machine thread count.
// Thread safety: one owner.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::train {

enum class LrDecay { kConstant, kLinear, kCosine };

// "constant", "linear", "cosine" → the decay; nullopt for another name.
std::optional<LrDecay> lr_decay_from_name(std::string_view name);

struct OptimizerConfig {
  double learning_rate = 1e-3;  // peak learning rate, > 0
  double beta1 = 0.9;           // in [0, 1)
  double beta2 = 0.999;         // in [0, 1)
  double eps = 1e-8;            // > 0
  double weight_decay = 0.0;    // decoupled, ≥ 0
  double max_grad_norm = 1.0;   // clip the global norm to this; 0 = no clipping
  int64_t warmup_steps = 0;     // linear warm-up from lr/(warmup+1) to lr over these steps
  LrDecay decay = LrDecay::kLinear;
  double min_lr_ratio = 0.0;  // the decay ends at learning_rate · min_lr_ratio, in [0, 1]

  [[nodiscard]] Status validate() const;
};

// The learning rate of step `step` (0-based) of `total_steps`.
double learning_rate_at(const OptimizerConfig& c, int64_t step, int64_t total_steps);

struct OptimizerStep {
  double learning_rate = 0.0;
  double grad_norm = 0.0;  // before clipping
  bool clipped = false;
};

class AdamW {
 public:
  AdamW(const OptimizerConfig& config, size_t num_params);

  // One update of `params` from `grads` (the batch's mean gradient; clipped in place), as step
  // number steps() of `total_steps`.
  OptimizerStep step(std::span<float> params, std::span<float> grads, int64_t total_steps);
  // Continues from saved moments after `steps` updates (a resumed run; train_state.h).
  // InvalidArgument when the moments are not num_params long or steps < 0.
  Status restore(std::vector<float> m, std::vector<float> v, int64_t steps);

  [[nodiscard]] int64_t steps() const { return steps_; }
  [[nodiscard]] const std::vector<float>& first_moment() const { return m_; }
  [[nodiscard]] const std::vector<float>& second_moment() const { return v_; }

 private:
  OptimizerConfig config_;
  std::vector<float> m_, v_;
  int64_t steps_ = 0;
};

}  // namespace keel::train
