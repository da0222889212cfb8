// AVX-512 + VNNI decode kernels for Q8_0 and Q4_0 weights in the row-group layout
// (weight_layout.h) against Q8_0 activations.
//
// A group's block is [16 fp16 scales][quads × 16 rows × 4 bytes]: one 64-byte load holds 4
// quants of each of the 16 rows, so `vpdpbusd` with 4 activation bytes broadcast leaves the 16
// rows' partial block dots in its lanes — no horizontal reduction, one sequential stream of
// weight bytes per thread. Q8_0 quants are made unsigned by XOR 0x80 (w + 128), Q4_0 nibbles are
// unsigned as stored (w + 8); the accumulator starts at −offset·Σa, so each lane ends with the
// exact integer block dot, which one convert + FMA with d_w·d_a adds to the row's sum — the same
// integers and the same f32 operations, in the same order, as the row-major kernels in
// avx512_q8.cpp, so both layouts give bit-identical results. Calls with kQ8GemmMinTokens tokens
// or more go to the grouped GEMM (avx512_q8_gemm.cpp); rows past the last full group (row-major)
// go to the row-major kernels.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/check.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::avx512 {
namespace {

// Bytes ahead of the block being computed that are prefetched (the hardware prefetchers alone fall
// behind a stream consumed this fast).
#ifndef KEEL_GROUPED_PREFETCH_AHEAD
#define KEEL_GROUPED_PREFETCH_AHEAD 2048
#endif
constexpr int64_t kPrefetchAhead = KEEL_GROUPED_PREFETCH_AHEAD;

inline __m512i broadcast_quad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

struct GroupedQ8_0 {
  static constexpr int64_t kBlockBytes = kGroupRows * kQ8_0Bytes;  // 544
  static constexpr int kOffsetShift = 7;
  // The 8 quad vectors of block `blk` as unsigned bytes, quad j = elements 4j..4j+3.
  static void load(const std::byte* blk, __m512i* w) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    for (int j = 0; j < 8; ++j) {
      w[j] = _mm512_xor_si512(_mm512_loadu_si512(blk + 32 + 64 * j), flip);
    }
  }
};

struct GroupedQ4_0 {
  static constexpr int64_t kBlockBytes = kGroupRows * kQ4_0Bytes;  // 288
  static constexpr int kOffsetShift = 3;
  // Byte i of a row holds element i (low nibble) and i + 16 (high nibble): quad vector j < 4
  // gives elements 4j.. in its low nibbles and 16 + 4j.. in its high nibbles.
  static void load(const std::byte* blk, __m512i* w) {
    const __m512i low4 = _mm512_set1_epi8(0x0f);
    for (int j = 0; j < 4; ++j) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * j);
      w[j] = _mm512_and_si512(v, low4);
      w[j + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
    }
  }
};

// One group (16 rows at `g`) × kT tokens from t0: y[t][row0 + i] for the rows in `mask`.
template <class F, int kT>
void group_tile(const MatmulTask& task, const std::byte* g, int64_t t0, float* y, __mmask16 mask) {
  const int64_t cols = task.w.cols, nb = cols / kQK;
  __m512 acc[kT];
  for (int t = 0; t < kT; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = g + b * F::kBlockBytes;
    if constexpr (kPrefetchAhead > 0) {
      for (int64_t off = 0; off < F::kBlockBytes; off += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchAhead + off, _MM_HINT_T0);
      }
    }
    __m512i w[8];
    F::load(blk, w);
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    for (int t = 0; t < kT; ++t) {
      const int64_t tok = t0 + t;
      const int8_t* a = task.q8.qs + tok * cols + b * kQK;
      const int32_t sum = task.q8.sum[tok * nb + b];
      // Two independent chains shorten the dependency on vpdpbusd's latency.
      __m512i d0 = _mm512_set1_epi32(-sum * (1 << F::kOffsetShift));
      __m512i d1 = _mm512_setzero_si512();
      for (int j = 0; j < 8; j += 2) {
        d0 = _mm512_dpbusd_epi32(d0, w[j], broadcast_quad(a + 4 * j));
        d1 = _mm512_dpbusd_epi32(d1, w[j + 1], broadcast_quad(a + 4 * j + 4));
      }
      const __m512i dot = _mm512_add_epi32(d0, d1);
      const float da = task.q8.d[tok * nb + b];
      acc[t] =
          _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[t]);
    }
  }
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * task.w.rows, mask, acc[t]);
}

template <class F>
void grouped(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  KEEL_DCHECK(row_begin % kGroupRows == 0);
  const int64_t full = grouped_rows(task.w.rows);
  const int64_t group_bytes = kGroupRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t r0 = row_begin; r0 < row_end && r0 < full; r0 += kGroupRows) {
    const int64_t valid = row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    const std::byte* g = task.w.data + r0 / kGroupRows * group_bytes;
    float* y = task.y + r0;
    int64_t t = 0;
    for (; t + 4 <= task.n_tokens; t += 4) group_tile<F, 4>(task, g, t, y, mask);
    switch (task.n_tokens - t) {
      case 3:
        group_tile<F, 3>(task, g, t, y, mask);
        break;
      case 2:
        group_tile<F, 2>(task, g, t, y, mask);
        break;
      case 1:
        group_tile<F, 1>(task, g, t, y, mask);
        break;
      default:
        break;
    }
  }
}

}  // namespace

void grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) {
    matmul_q8_0(task, row_begin > full ? row_begin : full, row_end);  // the row-major tail
    row_end = full;
  }
  if (row_begin >= row_end) return;
  if (task.n_tokens >= kQ8GemmMinTokens) return gemm_grouped_q8_0(task, row_begin, row_end);
  grouped<GroupedQ8_0>(task, row_begin, row_end);
}

void grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) {
    matmul_q4_0(task, row_begin > full ? row_begin : full, row_end);
    row_end = full;
  }
  if (row_begin >= row_end) return;
  if (task.n_tokens >= kQ8GemmMinTokens) return gemm_grouped_q4_0(task, row_begin, row_end);
  grouped<GroupedQ4_0>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx512
