// Roofline probes: this machine's memory bandwidth (read and STREAM-style triad, one thread and
// every thread of a pool) and arithmetic peaks (FP32 FMA, BF16 dot products, int8 dot products:
// VNNI `vpdpbusd` or AVX2 `vpmaddubsw`), for `keel bench --roofline`, which turns tokens/s into an
// efficiency against each phase's bound.
//
// Units: GB/s = 1e9 bytes/s; peaks in G operations/s where one multiply-add counts as 2. A peak a
// CPU lacks is 0. The probes measure, they do not model: a noisy machine gives noisy figures, so
// each is the best of `reps` runs.
#pragma once

#include <cstdint>

#include "core/cpu_features.h"
#include "core/result.h"
#include "core/thread_pool.h"

namespace keel::kernels {

struct RooflineOptions {
  int64_t buffer_bytes = int64_t{512} << 20;  // per bandwidth array; far beyond the caches
  int reps = 3;
  int64_t compute_iters = 100'000;  // passes over the L1-resident rows of each peak probe
};

struct Roofline {
  int threads = 1;
  double read_gbs_1t = 0, read_gbs = 0;    // sum of an array
  double triad_gbs_1t = 0, triad_gbs = 0;  // a[i] = b[i] + s·c[i], 3 arrays counted
  double fp32_gflops_1t = 0, fp32_gflops = 0;
  double bf16_gflops_1t = 0, bf16_gflops = 0;
  double int8_gops_1t = 0, int8_gops = 0;
  const char* int8_instruction = "";  // "vpdpbusd" or "vpmaddubsw" (or "" without AVX2)
};

// Measures everything on `pool` (all its threads, and its first thread alone).
Result<Roofline> measure_roofline(const CpuFeatures& cpu, ThreadPool& pool,
                                  const RooflineOptions& options = {});

namespace probes {
// Each runs `iters` passes of a 4 × 4 micro-kernel tile over L1-resident rows (roofline_tile.h)
// and returns the operations performed (multiply-add = 2). Call only when the CPU has the
// instructions.
double fma_f32_avx2(int64_t iters);
double fma_f32_avx512(int64_t iters);
double maddubs_avx2(int64_t iters);
double dpbusd_avx512(int64_t iters);
double dpbf16_avx512(int64_t iters);
// Sum of p[0..n) (n a multiple of 64) with 8 vector accumulators; the result defeats elimination.
float read_avx2(const float* p, int64_t n);
// a[i] = b[i] + s * c[i] for i in [0, n) (n a multiple of 16).
void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n);
}  // namespace probes

}  // namespace keel::kernels
