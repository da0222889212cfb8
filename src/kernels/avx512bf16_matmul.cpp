// BF16-weight matmul with AVX512-BF16 `vdpbf16ps`: the activations, already rounded to bf16 by
// Ops (task.x16), meet the weights 32 elements per instruction with exact products accumulated in
// f32 — the same numerics as the f32-FMA kernels up to summation order (and vdpbf16ps treating
// bf16 subnormals as zero). Compiled with AVX512-BF16 flags; reached only through the
// "avx512-bf16" table. Tiles as in avx512_float.cpp: 8 rows × 1 token (decode) or 4 × 4.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>

#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512bf16 {
namespace {

inline __m512bh load_bh(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bh_tail(const uint16_t* p, __mmask32 m) {
  return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

template <int kR, int kT>
void tile(const MatmulTask& task, const std::byte* const* rows, int valid, int64_t t0, float* y) {
  const int64_t cols = task.w.cols;
  const uint16_t* x[kT];
  const uint16_t* w[kR];
  __m512 acc[kR][kT];
  for (int r = 0; r < kR; ++r) w[r] = reinterpret_cast<const uint16_t*>(rows[r]);
  for (int t = 0; t < kT; ++t) {
    x[t] = task.x16 + (t0 + t) * cols;
    for (int r = 0; r < kR; ++r) acc[r][t] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= cols; k += 32) {
    __m512bh xv[kT];
    for (int t = 0; t < kT; ++t) xv[t] = load_bh(x[t] + k);
    for (int r = 0; r < kR; ++r) {
      const __m512bh wv = load_bh(w[r] + k);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  if (k < cols) {
    const __mmask32 m = static_cast<__mmask32>((1ull << (cols - k)) - 1);
    __m512bh xv[kT];
    for (int t = 0; t < kT; ++t) xv[t] = load_bh_tail(x[t] + k, m);
    for (int r = 0; r < kR; ++r) {
      const __m512bh wv = load_bh_tail(w[r] + k, m);
      for (int t = 0; t < kT; ++t) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv, xv[t]);
    }
  }
  for (int t = 0; t < kT; ++t) {
    for (int r = 0; r < valid; ++r) y[(t0 + t) * task.w.rows + r] = _mm512_reduce_add_ps(acc[r][t]);
  }
}

template <int kR>
void tiles_for_rows(const MatmulTask& task, const std::byte* const* rows, int valid, float* y) {
  int64_t t = 0;
  if (kR == 8) {
    for (; t < task.n_tokens; ++t) tile<kR, 1>(task, rows, valid, t, y);
    return;
  }
  for (; t + 4 <= task.n_tokens; t += 4) tile<kR, 4>(task, rows, valid, t, y);
  switch (task.n_tokens - t) {
    case 3:
      tile<kR, 3>(task, rows, valid, t, y);
      break;
    case 2:
      tile<kR, 2>(task, rows, valid, t, y);
      break;
    case 1:
      tile<kR, 1>(task, rows, valid, t, y);
      break;
    default:
      break;
  }
}

}  // namespace

void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const bool decode = task.n_tokens == 1;
  const int kr = decode ? 8 : 4;
  const std::byte* rows[8];
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kr) {
    const int valid = static_cast<int>(row_end - r0 < kr ? row_end - r0 : kr);
    for (int i = 0; i < kr; ++i) {
      const int64_t r = r0 + (i < valid ? i : valid - 1);
      rows[i] = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    }
    if (decode) {
      tiles_for_rows<8>(task, rows, valid, task.y + r0);
    } else {
      tiles_for_rows<4>(task, rows, valid, task.y + r0);
    }
  }
}

}  // namespace keel::kernels::avx512bf16
