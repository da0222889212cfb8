// Softmax arithmetic of the sampler, written so that it is both fast (loops the compiler can
// vectorise, with fixed-lane reductions) and bit-reproducible across platforms: keel's own exp
// (no libm), sums in a fixed association order, and no FMA contraction (this module is compiled
// with -ffp-contract=off). A sampled token therefore depends only on the seed and the logits.
//
// Weights are unnormalised probabilities relative to the most likely token:
//   weight_i = exp(logit_i - max_logit) in [0, 1], exactly 1 for the maximum, 0 for -inf and for
//   logits more than kExpCutoff below the maximum (probability < 1e-37: never sampled).
// Thread safety: pure functions.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace keel::sampling {

// Below this (as logit - max_logit) a weight is 0; keeps every non-zero weight a normal float.
inline constexpr float kExpCutoff = -86.0f;
// Weights are summed in blocks of this many tokens (see sum_weight_blocks).
inline constexpr size_t kWeightBlockSize = 1024;

// exp(x) for x <= 0: Cody-Waite range reduction x = n ln2 + r, |r| <= ln2/2, a degree-7 Taylor
// polynomial for exp(r), scaled by 2^n through the exponent bits. Relative error below 1e-6;
// exact 1 at 0; 0 for x < kExpCutoff, -inf and NaN. Plain float operations only, so the result is
// the same on every IEEE-754 platform.
inline float exp_nonpositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = 1.428606765330187045e-06f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool in_range = x >= kExpCutoff;      // false for NaN and -inf too
  const float xc = in_range ? x : kExpCutoff;
  const float t = xc * kLog2e + kRoundMagic;
  const float n = t - kRoundMagic;
  const int32_t n_int = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kRoundMagic);
  const float r = (xc - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<int32_t>((n_int + 127) << 23));
  return in_range ? p * scale : 0.0f;
}

// In place: NaN → -inf, and logit / temperature when temperature != 1. Returns the maximum.
float prepare_logits(std::span<float> logits, float temperature);

// weights[i] = exp_nonpositive(logits[i] - max_logit). Sizes must match.
void compute_weights(std::span<const float> logits, float max_logit, std::span<float> weights);

// block_sums[b] = sum of weights[b * kWeightBlockSize, ...) (in double, fixed lanes); returns the
// total (blocks added in order). block_sums must hold ceil(size / kWeightBlockSize) entries.
double sum_weight_blocks(std::span<const float> weights, std::span<double> block_sums);

// The first index whose running weight sum exceeds target (0 <= target < total), found through
// the block sums. Zero-weight entries are never returned. At least one weight must be positive.
int32_t pick_weighted(std::span<const float> weights, std::span<const double> block_sums,
                      double target);

// The index of the largest value, ties to the lowest index; NaN ignored; 0 if no value is
// greater than -inf.
int32_t argmax(std::span<const float> values);

}  // namespace keel::sampling
