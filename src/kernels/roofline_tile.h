// The micro-kernel shape the roofline peak probes share (see roofline_avx512.cpp): R weight rows
// × C activation rows of vectors V, R·C accumulators, rows of 2 KiB kept in L1. Header-only so
// each ISA file instantiates it with its own target flags.
#pragma once

#include <cstdint>
#include <cstring>

namespace keel::kernels::probes {

// Runs `iters` passes over the rows with op(acc, w, x) on an R × C tile (R·C accumulators; AVX-512
// has 32 registers for 4 × 4, AVX2 16 for 2 × 4) and returns the operations performed;
// `ops_per_op` counts one call of `op` (a multiply-add is 2).
template <typename V, int R, int C, typename Op>
double tile_probe(int64_t iters, double ops_per_op, Op op) {
  constexpr int kSteps = 2048 / static_cast<int>(sizeof(V));
  alignas(64) V w_rows[R][kSteps];
  alignas(64) V x_rows[C][kSteps];
  // Every lane 1e-3f: no overflow, NaN or denormal slow paths (the integer probes see its bytes).
  float f[sizeof(V) / sizeof(float)];
  for (float& v : f) v = 1e-3f;
  for (int k = 0; k < kSteps; ++k) {
    for (int r = 0; r < R; ++r) std::memcpy(&w_rows[r][k], f, sizeof(V));
    for (int c = 0; c < C; ++c) std::memcpy(&x_rows[c][k], f, sizeof(V));
  }
  V acc[R * C];
  std::memset(acc, 0, sizeof(acc));
  for (int64_t it = 0; it < iters; ++it) {
    for (int k = 0; k < kSteps; ++k) {
      V w[R];
      for (int r = 0; r < R; ++r) w[r] = w_rows[r][k];
      for (int c = 0; c < C; ++c) {
        const V x = x_rows[c][k];
        for (int r = 0; r < R; ++r) acc[r * C + c] = op(acc[r * C + c], w[r], x);
      }
    }
  }
  volatile char sink = 0;
  for (const V& a : acc) sink = static_cast<char>(sink + reinterpret_cast<const char*>(&a)[0]);
  return static_cast<double>(iters) * kSteps * R * C * ops_per_op;
}

}  // namespace keel::kernels::probes
