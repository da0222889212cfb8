// StepCostModel: recursive least squares over (1, prefill tokens, decode seqs).
#include "engine/step_cost_model.h"

#include <algorithm>
#include <cmath>

namespace keel::engine {

void StepCostModel::observe(int32_t prefill_tokens, int32_t decode_seqs, double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return;
  const std::array<double, 3> x = {1.0, static_cast<double>(prefill_tokens),
                                   static_cast<double>(decode_seqs)};
  std::array<double, 3> px{};  // P·x
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) px[i] += p_[i][j] * x[j];
  }
  double denom = kForgetting;
  for (int i = 0; i < 3; ++i) denom += x[i] * px[i];
  double err = seconds;
  for (int i = 0; i < 3; ++i) err -= theta_[i] * x[i];
  for (int i = 0; i < 3; ++i) theta_[i] += px[i] / denom * err;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) p_[i][j] = (p_[i][j] - px[i] * px[j] / denom) / kForgetting;
  }
  ++n_;
  if (prefill_tokens > 0) ++n_prefill_;
}

bool StepCostModel::ready() const {
  return n_ >= kMinSteps && n_prefill_ >= kMinSteps / 2 && theta_[1] > 0;
}

double StepCostModel::predict(int32_t prefill_tokens, int32_t decode_seqs) const {
  return theta_[0] + theta_[1] * prefill_tokens + theta_[2] * decode_seqs;
}

int32_t StepCostModel::prefill_budget(int32_t decode_seqs, double target_seconds,
                                      int32_t min_tokens, int32_t max_tokens) const {
  if (!ready()) return max_tokens;
  const double room = target_seconds - predict(0, decode_seqs);
  const double n = room / theta_[1];
  if (!(n > min_tokens)) return min_tokens;
  return static_cast<int32_t>(std::min<double>(n, max_tokens));
}

}  // namespace keel::engine
