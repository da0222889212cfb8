// AVX2 decode kernels for Q8_0 and Q4_0 weights in the row-group layout (weight_layout.h) against
// Q8_0 activations.
//
// A 64-byte quad vector of a group holds 4 quants of each of the 16 rows; its two 32-byte halves
// are rows 0–7 and 8–15, one ymm each. Per half and token, `maddubs` against 4 activation bytes
// broadcast leaves each row's int16 pair sums in its own 32-bit lane (Q4_0: nibbles 0..15, eight
// quads summed in int16 without saturation, |Σ| ≤ 8·2·15·127; Q8_0: |w| against the
// sign-transferred activations, ≤ 2·128·127 per quad, widened at once), `madd` with ones gives
// the rows' exact block dots, and one convert + FMA with d_w·d_a accumulates — the same integers
// and f32 operations as the row-major kernels in avx2_q8.cpp, so the layouts agree bit for bit.
// No horizontal reductions; one sequential stream of weight bytes.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::avx2 {
namespace {

constexpr int kMaxTokens = 2;

inline __m256i load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Bytes ahead of the block being computed that the kernels prefetch.
constexpr int64_t kPrefetchAhead = 2048;

inline void prefetch_bytes(const std::byte* p, int64_t bytes) {
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p) + off, _MM_HINT_T0);
  }
}

inline __m256i broadcast_quad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

struct GroupedQ8_0 {
  static constexpr int64_t kBlockBytes = kGroupRows * kQ8_0Bytes;
  static constexpr int kOffset = 0;
  // The exact block dots of the 8 rows of half h.
  static __m256i dots(const std::byte* blk, int h, const __m256i* a) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i w = load256(blk + 32 + 64 * j + 32 * h);
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a[j], w));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
    }
    return acc;
  }
};

struct GroupedQ4_0 {
  static constexpr int64_t kBlockBytes = kGroupRows * kQ4_0Bytes;
  static constexpr int kOffset = 8;
  // Quad vector j < 4: elements 4j.. in the low nibbles, 16 + 4j.. in the high nibbles.
  static __m256i dots(const std::byte* blk, int h, const __m256i* a) {
    const __m256i low4 = _mm256_set1_epi8(0x0f);
    __m256i p = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i v = load256(blk + 32 + 64 * j + 32 * h);
      p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(v, low4), a[j]));
      p = _mm256_add_epi16(
          p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), a[j + 4]));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
  }
};

// One group (16 rows at `g`) × kT tokens from t0; `valid` rows are stored.
template <class F, int kT>
void group_tile(const MatmulTask& task, const std::byte* g, int64_t t0, float* y, int valid) {
  const int64_t cols = task.w.cols, nb = cols / kQK;
  __m256 acc[2][kT];
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < kT; ++t) acc[h][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = g + b * F::kBlockBytes;
    prefetch_bytes(blk + kPrefetchAhead, F::kBlockBytes);
    for (int t = 0; t < kT; ++t) {
      const int64_t ab = (t0 + t) * nb + b;
      const int8_t* aq = task.q8.qs + ab * kQK;
      __m256i a[8];
      for (int j = 0; j < 8; ++j) a[j] = broadcast_quad(aq + 4 * j);
      const __m256 da = _mm256_set1_ps(task.q8.d[ab]);
      for (int h = 0; h < 2; ++h) {
        __m256i dot = F::dots(blk, h, a);
        if (F::kOffset != 0) {
          dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(task.q8.sum[ab] * F::kOffset));
        }
        const __m256 dw =
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16 * h)));
        acc[h][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(dw, da), acc[h][t]);
      }
    }
  }
  for (int t = 0; t < kT; ++t) {
    float* yt = y + (t0 + t) * task.w.rows;
    if (valid == kGroupRows) {
      _mm256_storeu_ps(yt, acc[0][t]);
      _mm256_storeu_ps(yt + 8, acc[1][t]);
    } else {
      alignas(32) float tmp[kGroupRows];
      _mm256_store_ps(tmp, acc[0][t]);
      _mm256_store_ps(tmp + 8, acc[1][t]);
      for (int i = 0; i < valid; ++i) yt[i] = tmp[i];
    }
  }
}

template <class F>
void grouped(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t group_bytes = kGroupRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    const int valid = static_cast<int>(row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows);
    const std::byte* g = task.w.data + r0 / kGroupRows * group_bytes;
    int64_t t = 0;
    for (; t + kMaxTokens <= task.n_tokens; t += kMaxTokens) {
      group_tile<F, kMaxTokens>(task, g, t, task.y + r0, valid);
    }
    if (t < task.n_tokens) group_tile<F, 1>(task, g, t, task.y + r0, valid);
  }
}

// The row-major tail, then the grouped rows.
template <class F>
void dispatch(const MatmulTask& task, int64_t row_begin, int64_t row_end, MatmulFn row_major) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) {
    row_major(task, row_begin > full ? row_begin : full, row_end);
    row_end = full;
  }
  if (row_begin < row_end) grouped<F>(task, row_begin, row_end);
}

}  // namespace

void grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<GroupedQ8_0>(task, row_begin, row_end, matmul_q8_0);
}

void grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<GroupedQ4_0>(task, row_begin, row_end, matmul_q4_0);
}

}  // namespace keel::kernels::avx2
