// What the draft-head and exit-predictor datasets share when they make the target model generate
// its own training text: the KV block size of their scratch context, a per-sequence seed derived
// from (dataset seed, sequence index, stream), and the sampling those sequences use (top-k 40).
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "sampling/rng.h"
#include "sampling/sampling_params.h"

namespace keel::draft {

inline constexpr int32_t kDatasetKvBlock = 16;

inline uint64_t derive_seed(uint64_t seed, int64_t index, uint64_t stream) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(index) * 1000003ull + stream;
  return sampling::splitmix64_next(&s);
}

inline sampling::SamplingParams sampled(float temperature, uint64_t seed) {
  sampling::SamplingParams p;
  p.temperature = temperature;
  p.top_k = 40;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = seed;
  return p;
}

}  // namespace keel::draft
