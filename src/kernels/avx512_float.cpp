// AVX-512 matmul kernels for F32, F16 and BF16 weights against f32 activations (for F16/BF16 the
// activations were already rounded to the weight's type by Ops, so products are exact).
//
// A tile is R rows × T tokens of 16-lane f32 accumulators, one per (row, token), walked along K in
// steps of 16 with a masked tail; each accumulator is reduced horizontally once at the end. Decode
// (one token) uses 8 rows per tile, prefill 4 rows × 6 tokens so every weight vector loaded feeds
// 6 FMAs; prefill walks rows in L2-sized blocks (float_matmul_blocks.h). The per-(row, token)
// arithmetic is the same in every tile shape, so results do not depend on how rows are split across
// threads.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>

#include "kernels/float_matmul_blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {
namespace {

struct F32Weights {
  static __m512 load(const std::byte* row, int64_t k) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + k);
  }
  static __m512 load_tail(const std::byte* row, int64_t k, __mmask16 m) {
    return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + k);
  }
};

struct F16Weights {
  static __m512 load(const std::byte* row, int64_t k) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 load_tail(const std::byte* row, int64_t k, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  }
};

struct Bf16Weights {
  static __m512 widen(__m256i h) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static __m512 load(const std::byte* row, int64_t k) {
    return widen(_mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(reinterpret_cast<const uint16_t*>(row) + k)));
  }
  static __m512 load_tail(const std::byte* row, int64_t k, __mmask16 m) {
    return widen(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const uint16_t*>(row) + k));
  }
};

// y[t0+t][r0+r] for r < valid rows, t < kT tokens.
template <class W, int kR, int kT>
void tile(const MatmulTask& task, const std::byte* const* rows, int valid, int64_t t0, float* y) {
  const int64_t cols = task.w.cols;
  const float* x[kT];
  __m512 acc[kR][kT];
  for (int t = 0; t < kT; ++t) {
    x[t] = task.x + (t0 + t) * cols;
    for (int r = 0; r < kR; ++r) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 16 <= cols; k += 16) {
    __m512 xv[kT];
    for (int t = 0; t < kT; ++t) xv[t] = _mm512_loadu_ps(x[t] + k);
    for (int r = 0; r < kR; ++r) {
      const __m512 w = W::load(rows[r], k);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm512_fmadd_ps(w, xv[t], acc[r][t]);
    }
  }
  if (k < cols) {
    const __mmask16 m = static_cast<__mmask16>((1u << (cols - k)) - 1);
    __m512 xv[kT];
    for (int t = 0; t < kT; ++t) xv[t] = _mm512_maskz_loadu_ps(m, x[t] + k);
    for (int r = 0; r < kR; ++r) {
      const __m512 w = W::load_tail(rows[r], k, m);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm512_fmadd_ps(w, xv[t], acc[r][t]);
    }
  }
  for (int t = 0; t < kT; ++t) {
    for (int r = 0; r < valid; ++r) y[(t0 + t) * task.w.rows + r] = _mm512_reduce_add_ps(acc[r][t]);
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
  matmul_float_blocked<Tiles<W>, 4, 6>(task, row_begin, row_end);
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

}  // namespace keel::kernels::avx512
