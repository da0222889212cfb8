// AVX2 matmul kernels for F32, F16 and BF16 weights against f32 activations (for F16/BF16 the
// activations were already rounded to the weight's type by Ops, so products are exact).
//
// Tiles of R rows × T tokens of 8-lane f32 accumulators walked along K in steps of 8; the K tail
// (cols % 8) goes through zero-padded copies. Decode uses 8 rows × 1 token, prefill 4 rows ×
// 3 tokens, in L2-sized row blocks (float_matmul_blocks.h). The per-(row, token) arithmetic is
// the same in every tile shape, so results do not depend on how rows are split across threads.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/float_matmul_blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx2 {
namespace {

struct F32Weights {
  static constexpr int kElemBytes = 4;
  static __m256 load(const std::byte* p) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  }
};

struct F16Weights {
  static constexpr int kElemBytes = 2;
  static __m256 load(const std::byte* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

struct Bf16Weights {
  static constexpr int kElemBytes = 2;
  static __m256 load(const std::byte* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
};

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

template <class W, int kR, int kT>
void tile(const MatmulTask& task, const std::byte* const* rows, int valid, int64_t t0, float* y) {
  const int64_t cols = task.w.cols;
  const float* x[kT];
  __m256 acc[kR][kT];
  for (int t = 0; t < kT; ++t) {
    x[t] = task.x + (t0 + t) * cols;
    for (int r = 0; r < kR; ++r) acc[r][t] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 8 <= cols; k += 8) {
    __m256 xv[kT];
    for (int t = 0; t < kT; ++t) xv[t] = _mm256_loadu_ps(x[t] + k);
    for (int r = 0; r < kR; ++r) {
      const __m256 w = W::load(rows[r] + k * W::kElemBytes);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm256_fmadd_ps(w, xv[t], acc[r][t]);
    }
  }
  if (k < cols) {  // zero-padded copies of the last cols - k elements
    const size_t left = static_cast<size_t>(cols - k);
    __m256 xv[kT];
    for (int t = 0; t < kT; ++t) {
      alignas(32) float buf[8] = {};
      std::memcpy(buf, x[t] + k, left * sizeof(float));
      xv[t] = _mm256_load_ps(buf);
    }
    for (int r = 0; r < kR; ++r) {
      alignas(32) std::byte buf[32] = {};
      std::memcpy(buf, rows[r] + k * W::kElemBytes, left * W::kElemBytes);
      const __m256 w = W::load(buf);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm256_fmadd_ps(w, xv[t], acc[r][t]);
    }
  }
  for (int t = 0; t < kT; ++t) {
    for (int r = 0; r < valid; ++r) y[(t0 + t) * task.w.rows + r] = hsum(acc[r][t]);
  }
}

template <class W>
struct Tiles {
  template <int kR, int kT>
  static void run(const MatmulTask& task, const std::byte* const* rows, int valid, int64_t t0,
                  float* y) {
    tile<W, kR, kT>(task, rows, valid, t0, y);
  }
};

template <class W>
void matmul_float(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_float_blocked<Tiles<W>, 4, 3>(task, row_begin, row_end);
}

}  // namespace

void matmul_f32(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_float<F32Weights>(task, row_begin, row_end);
}

void matmul_f16(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_float<F16Weights>(task, row_begin, row_end);
}

void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_float<Bf16Weights>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx2
