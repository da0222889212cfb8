// AdamW, its schedule and global-norm clipping (adamw.h).
#include "train/adamw.h"

#include <cmath>
#include <numbers>

#include "core/check.h"

namespace keel::train {

Status OptimizerConfig::validate() const {
  if (!(learning_rate > 0.0) || !std::isfinite(learning_rate)) {
    return Status::invalid_argument("the learning rate must be a finite number > 0");
  }
  if (!(beta1 >= 0.0 && beta1 < 1.0) || !(beta2 >= 0.0 && beta2 < 1.0)) {
    return Status::invalid_argument("Adam's betas must be in [0, 1)");
  }
  if (!(eps > 0.0)) return Status::invalid_argument("Adam's eps must be > 0");
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay)) {
    return Status::invalid_argument("the weight decay must be a finite number ≥ 0");
  }
  if (!(max_grad_norm >= 0.0)) return Status::invalid_argument("the clipping norm must be ≥ 0");
  if (warmup_steps < 0) return Status::invalid_argument("warm-up steps must be ≥ 0");
  if (!(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0)) {
    return Status::invalid_argument("the final learning-rate ratio must be in [0, 1]");
  }
  return Status();
}

std::optional<LrDecay> lr_decay_from_name(std::string_view name) {
  if (name == "constant") return LrDecay::kConstant;
  if (name == "linear") return LrDecay::kLinear;
  if (name == "cosine") return LrDecay::kCosine;
  return std::nullopt;
}

double learning_rate_at(const OptimizerConfig& c, int64_t step, int64_t total_steps) {
  if (step < c.warmup_steps) {
    return c.learning_rate * static_cast<double>(step + 1) /
           static_cast<double>(c.warmup_steps + 1);
  }
  const int64_t decay_steps = total_steps - c.warmup_steps;
  if (c.decay == LrDecay::kConstant || decay_steps <= 1) return c.learning_rate;
  const double progress =
      static_cast<double>(step - c.warmup_steps) / static_cast<double>(decay_steps - 1);
  const double f = c.decay == LrDecay::kLinear
                       ? 1.0 - progress
                       : 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return c.learning_rate * (c.min_lr_ratio + (1.0 - c.min_lr_ratio) * f);
}

AdamW::AdamW(const OptimizerConfig& config, size_t num_params)
    : config_(config), m_(num_params, 0.0f), v_(num_params, 0.0f) {}

Status AdamW::restore(std::vector<float> m, std::vector<float> v, int64_t steps) {
  if (m.size() != m_.size() || v.size() != v_.size() || steps < 0) {
    return Status::invalid_argument("the saved optimizer state does not fit this adapter");
  }
  m_ = std::move(m);
  v_ = std::move(v);
  steps_ = steps;
  return Status();
}

OptimizerStep AdamW::step(std::span<float> params, std::span<float> grads, int64_t total_steps) {
  KEEL_CHECK(params.size() == m_.size() && grads.size() == m_.size());
  OptimizerStep s;
  s.learning_rate = learning_rate_at(config_, steps_, total_steps);
  double sq = 0.0;
  for (float g : grads) sq += static_cast<double>(g) * g;
  s.grad_norm = std::sqrt(sq);
  if (config_.max_grad_norm > 0.0 && s.grad_norm > config_.max_grad_norm) {
    const auto f = static_cast<float>(config_.max_grad_norm / s.grad_norm);
    for (float& g : grads) g *= f;
    s.clipped = true;
  }
  ++steps_;
  const double c1 = 1.0 - std::pow(config_.beta1, static_cast<double>(steps_));
  const double c2 = 1.0 - std::pow(config_.beta2, static_cast<double>(steps_));
  const auto b1 = static_cast<float>(config_.beta1), b2 = static_cast<float>(config_.beta2);
  for (size_t i = 0; i < params.size(); ++i) {
    const float g = grads[i];
    m_[i] = b1 * m_[i] + (1.0f - b1) * g;
    v_[i] = b2 * v_[i] + (1.0f - b2) * g * g;
    const double m_hat = m_[i] / c1, v_hat = v_[i] / c2;
    const double update = m_hat / (std::sqrt(v_hat) + config_.eps) +
                          config_.weight_decay * static_cast<double>(params[i]);
    params[i] = static_cast<float>(params[i] - s.learning_rate * update);
  }
  return s;
}

}  // namespace keel::train
