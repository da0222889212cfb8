// rope_angles and yarn_corr_dims (see rope.h). Compiled with -ffp-contract=off like the rest of the
// module: each product and sum rounds to f32 as written.
#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace keel::kernels {
namespace {

float corr_dim(int64_t n_rot, int64_t n_ctx_orig, float beta, float base) {
  const float turns = beta * 2.0f * std::numbers::pi_v<float>;
  return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / turns) /
         (2.0f * std::log(base));
}

}  // namespace

YarnRamp yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                        float beta_slow) {
  const float start = std::floor(corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
  return {std::max(0.0f, start), std::min(static_cast<float>(n_rot - 1), end)};
}

void rope_angles(const RopeParams& p, int32_t pos, float* cos_out, float* sin_out) {
  const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
  const float span = std::max(0.001f, p.yarn_high - p.yarn_low);
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < p.n_rot / 2; ++i) {
    const float extrap = p.freq_factors ? theta / p.freq_factors[i] : theta;
    const float interp = p.freq_scale * extrap;
    float angle = interp;
    if (p.ext_factor != 0.0f) {
      const float y = (static_cast<float>(i) - p.yarn_low) / span;
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
      angle = interp * (1.0f - mix) + extrap * mix;
    }
    cos_out[i] = std::cos(angle) * p.mscale;
    sin_out[i] = std::sin(angle) * p.mscale;
    theta *= theta_scale;
  }
}

}  // namespace keel::kernels
