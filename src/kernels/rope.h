// RoPE's angle table and YaRN's correction range, computed as llama.cpp (ggml) computes them, in
// f32 with the same operations in the same order, so a YaRN-scaled model rotates its rows as
// llama.cpp does. Ops::rope (every ISA tier) builds its per-position table with rope_angles().
//
// YaRN (Peng et al., "YaRN: Efficient Context Window Extension of Large Language Models"), as
// ggml's rope_yarn: with θx the unscaled angle of pair i (position · base^(-2i/n_rot) / the
// pair's frequency factor) and θi = freq_scale · θx the interpolated one, the pair turns by
//   θ = θi · (1 − m) + θx · m,   m = ramp(i) · ext_factor,
//   ramp(i) = 1 − clamp((i − low) / max(0.001, high − low), 0, 1),
// so the fast pairs (i ≤ low) keep their trained angle, the slow ones (i ≥ high) are
// interpolated, and cos and sin are multiplied by RopeParams::mscale (llama.cpp:
// attn_factor · (1 + 0.1 · ln(1 / freq_scale)), see model/hparams.h).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace keel::kernels {

// ggml_rope_yarn_corr_dims: the ramp's ends. Pair d(β) is the one that turns β times over
// n_ctx_orig positions, d(β) = n_rot · ln(n_ctx_orig / (2π·β)) / (2 · ln base);
// low = max(0, floor(d(beta_fast))), high = min(n_rot − 1, ceil(d(beta_slow))).
struct YarnRamp {
  float low = 0.0f;
  float high = 0.0f;
};
YarnRamp yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float freq_base, float beta_fast,
                        float beta_slow);

// The rotation of every pair i in [0, n_rot/2) at `pos`: cos_out[i] = mscale · cos θ,
// sin_out[i] = mscale · sin θ.
void rope_angles(const RopeParams& p, int32_t pos, float* cos_out, float* sin_out);

}  // namespace keel::kernels
