// AVX-512 paged-attention work unit (PagedAttentionTask, dispatch.h): all query rows of the unit
// (up to kQueryTile tokens × the group's heads) against each tile of kKeyTile positions, so a
// K/V tile is read and widened once for the whole unit, and both products are small register-
// blocked matrix multiplies:
//   - K tile → f32, transposed to kt[head_dim][kKeyTile] (16×16 register transposes; Q8_0 rows
//     widened as scale · q first); V tile → f32 rows (f16 and Q8_0; f32 read in place);
//   - scores: blocks of 6 rows × 64 positions in 24 accumulators, each row's score of a position
//     the sum over d, in order, of q[d]·k[d] (one FMA chain), times the scale;
//   - per row: the tile's max over the row's own positions, e^(s − m) (avx512_math.h), the
//     running max / sum update;
//   - weighted V: blocks of 4 rows × 64 dims, acc·α then one FMA per position, in order.
// Every row is computed by the same operations in the same order whatever the other rows of the
// unit are, so a token's bits do not depend on its tile (paged_attention.cpp relies on this).
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx512_math.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_rows.h"

namespace keel::kernels::avx512 {
namespace {

constexpr int kKeyVecs = kKeyTile / 16;
constexpr int kRowBlock = 6;   // query rows per register block of the scores
constexpr int kPvRows = 4;     // query rows per register block of the weighted V sum
constexpr int kMaxRows = 128;  // query rows per pass over the unit's positions
static_assert(kKeyTile == 64);

// In place: r[j] lane i ← r[i] lane j.
inline void transpose16(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  __m512 u[16];  // u[4k + c], 128-bit lane L: column 4L + c of rows 4k .. 4k + 3
  for (int k = 0; k < 4; ++k) {
    u[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int c = 0; c < 4; ++c) {
    const __m512 v0 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 v1 = _mm512_shuffle_f32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512 v2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 v3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 1, 3, 1));
    r[c] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(2, 0, 2, 0));
    r[8 + c] = _mm512_shuffle_f32x4(v0, v2, _MM_SHUFFLE(3, 1, 3, 1));
    r[4 + c] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(2, 0, 2, 0));
    r[12 + c] = _mm512_shuffle_f32x4(v1, v3, _MM_SHUFFLE(3, 1, 3, 1));
  }
}

inline __mmask16 lanes_below(int64_t n, int64_t j) {
  return n - j >= 16 ? static_cast<__mmask16>(0xffff)
                     : (n > j ? tail_mask(n - j) : static_cast<__mmask16>(0));
}

// kt[d][kb·16 + i] = row i's value d, for the 16 rows (f32 or f16 slices) and d < dim.
template <bool kHalf>
void transpose_rows(const void* const* rows, int64_t dim, int kb, float* kt) {
  __m512 r[16];
  for (int64_t d0 = 0; d0 < dim; d0 += 16) {
    const __mmask16 m = lanes_below(dim, d0);
    for (int i = 0; i < 16; ++i) {
      if constexpr (kHalf) {
        const auto* h = static_cast<const uint16_t*>(rows[i]) + d0;
        r[i] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, h));
      } else {
        r[i] = _mm512_maskz_loadu_ps(m, static_cast<const float*>(rows[i]) + d0);
      }
    }
    transpose16(r);
    const int64_t n = std::min<int64_t>(16, dim - d0);
    for (int64_t c = 0; c < n; ++c) _mm512_storeu_ps(kt + (d0 + c) * kKeyTile + kb * 16, r[c]);
  }
}

// dim f16 values at src → f32 at dst.
void widen(const std::byte* src, int64_t dim, float* dst) {
  for (int64_t d = 0; d < dim; d += 16) {
    const __mmask16 m = lanes_below(dim, d);
    _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + d * 2)));
  }
}

// dim Q8_0 values starting `skip` values into the block at src → f32 (scale · q) at dst.
void widen_q8(const std::byte* src, int64_t skip, int64_t dim, float* dst) {
  for (int64_t d = 0; d < dim; src += kQ8BlockBytes, skip = 0) {
    uint16_t h;
    std::memcpy(&h, src, 2);
    const __m512 vs = _mm512_set1_ps(_cvtsh_ss(h));
    const auto* qs = reinterpret_cast<const int8_t*>(src + 2) + skip;
    const int64_t n = std::min(kQ8Values - skip, dim - d);
    for (int64_t j = 0; j < n; j += 16) {
      const __mmask16 m = lanes_below(n, j);
      const __m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, qs + j));
      _mm512_mask_storeu_ps(dst + d + j, m, _mm512_mul_ps(_mm512_cvtepi32_ps(q), vs));
    }
    d += n;
  }
}

// s[r][0, 64) = scale · Σ_d q[r][d]·kt[d][·] for kR rows. (The small loops are unrolled by
// pragma so that GCC keeps the accumulator arrays in registers instead of storing them each
// iteration.)
template <int kR>
void score_block(const float* const* q, const float* kt, int64_t dim, float scale,
                 float* const* s) {
  __m512 a[kR][kKeyVecs];
#pragma GCC unroll 16
  for (auto& row : a) {
#pragma GCC unroll 16
    for (auto& v : row) v = _mm512_setzero_ps();
  }
  for (int64_t d = 0; d < dim; ++d) {
    __m512 k[kKeyVecs];
#pragma GCC unroll 16
    for (int c = 0; c < kKeyVecs; ++c) k[c] = _mm512_loadu_ps(kt + d * kKeyTile + 16 * c);
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const __m512 b = _mm512_set1_ps(q[r][d]);
#pragma GCC unroll 16
      for (int c = 0; c < kKeyVecs; ++c) a[r][c] = _mm512_fmadd_ps(b, k[c], a[r][c]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kKeyVecs; ++c) _mm512_storeu_ps(s[r] + 16 * c, _mm512_mul_ps(a[r][c], vs));
  }
}

// acc[r][d0, d0 + 16·kC) = α[r]·acc[r] + Σ_{j<n} p[r][j]·v_j for kR rows (the last vector masked
// by `last`).
template <int kR, int kC>
void pv_block(float* const* acc, const float* alpha, const float* const* p, int32_t n,
              const float* const* vrows, int64_t d0, __mmask16 last) {
  __mmask16 mk[kC];
#pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) mk[c] = c + 1 == kC ? last : static_cast<__mmask16>(0xffff);
  __m512 a[kR][kC];
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
    const __m512 va = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) {
      a[r][c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[c], acc[r] + d0 + 16 * c), va);
    }
  }
#pragma GCC unroll 16
  for (int32_t j = 0; j < n; ++j) {
    __m512 v[kC];
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) v[c] = _mm512_maskz_loadu_ps(mk[c], vrows[j] + d0 + 16 * c);
#pragma GCC unroll 16
    for (int r = 0; r < kR; ++r) {
      const __m512 b = _mm512_set1_ps(p[r][j]);
#pragma GCC unroll 16
      for (int c = 0; c < kC; ++c) a[r][c] = _mm512_fmadd_ps(b, v[c], a[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < kR; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) _mm512_mask_storeu_ps(acc[r] + d0 + 16 * c, mk[c], a[r][c]);
  }
}

template <int kC>
void pv_rows(int nr, float* const* acc, const float* alpha, const float* const* p, int32_t n,
             const float* const* vrows, int64_t d0, __mmask16 last) {
  switch (nr) {
    case 1:
      return pv_block<1, kC>(acc, alpha, p, n, vrows, d0, last);
    case 2:
      return pv_block<2, kC>(acc, alpha, p, n, vrows, d0, last);
    case 3:
      return pv_block<3, kC>(acc, alpha, p, n, vrows, d0, last);
    case 4:
      return pv_block<4, kC>(acc, alpha, p, n, vrows, d0, last);
    case 5:
      return pv_block<5, kC>(acc, alpha, p, n, vrows, d0, last);
    default:
      return pv_block<6, kC>(acc, alpha, p, n, vrows, d0, last);
  }
}

void score_rows(int nr, const float* const* q, const float* kt, int64_t dim, float scale,
                float* const* s) {
  switch (nr) {
    case 1:
      return score_block<1>(q, kt, dim, scale, s);
    case 2:
      return score_block<2>(q, kt, dim, scale, s);
    case 3:
      return score_block<3>(q, kt, dim, scale, s);
    case 4:
      return score_block<4>(q, kt, dim, scale, s);
    case 5:
      return score_block<5>(q, kt, dim, scale, s);
    default:
      return score_block<6>(q, kt, dim, scale, s);
  }
}

// One row's online-softmax step over its first n scores of the tile (s[n, 64) set to 0):
// s ← e^(s − m'), l ← l·α + Σ s, m ← m'; returns α = e^(m − m') (0 for the row's first tile).
float softmax_row(float* s, int32_t n, float* m, float* l) {
  __m512 mx = _mm512_set1_ps(-INFINITY);
  for (int c = 0; c < kKeyVecs; ++c) {
    const __mmask16 k = lanes_below(n, 16 * c);
    mx = _mm512_mask_max_ps(mx, k, mx, _mm512_loadu_ps(s + 16 * c));
  }
  const float m_new = std::max(*m, _mm512_reduce_max_ps(mx));
  const float alpha = *m == -INFINITY ? 0.0f : std::exp(*m - m_new);
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int c = 0; c < kKeyVecs; ++c) {
    const __mmask16 k = lanes_below(n, 16 * c);
    const __m512 e = _mm512_maskz_mov_ps(k, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(s + 16 * c), vm)));
    _mm512_storeu_ps(s + 16 * c, e);
    sum = _mm512_add_ps(sum, e);
  }
  *l = *l * alpha + _mm512_reduce_add_ps(sum);
  *m = m_new;
  return alpha;
}

// The rows of a pass with positions in the current tile, gathered for the blocked products.
struct ActiveRows {
  int n = 0;
  const float* q[kMaxRows];
  float* s[kMaxRows];
  float* acc[kMaxRows];
  float* m[kMaxRows];
  float* l[kMaxRows];
  float alpha[kMaxRows];
  int32_t n_pos[kMaxRows];  // the row's positions in the tile
};

// Scratch of one unit (see paged_attention_scratch_floats).
struct Scratch {
  float* scores;  // [rows][kKeyTile]
  float* kt;      // [dim16][kKeyTile] the K tile, transposed
  float* vt;      // [kKeyTile][dim16] the V tile widened (f16, Q8_0)
  float* kw;      // [kKeyTile][dim16] the K tile widened (Q8_0)
  float* zeros;   // [dim16] the K row of a missing position
};

// The K tile (rows[0, n), zeros after) into kt.
template <DType kType>
void load_k_tile(const std::byte* const* rows, int32_t n, int64_t dim, int64_t dim16, int64_t skip,
                 const Scratch& w) {
  for (int kb = 0; kb < kKeyVecs; ++kb) {
    const void* src[16];
    for (int i = 0; i < 16; ++i) {
      const int32_t j = kb * 16 + i;
      if (j >= n) {
        src[i] = w.zeros;
      } else if constexpr (kType == DType::kQ8_0) {
        widen_q8(rows[j], skip, dim, w.kw + j * dim16);
        src[i] = w.kw + j * dim16;
      } else {
        src[i] = rows[j];
      }
    }
    transpose_rows<kType == DType::kF16>(src, dim, kb, w.kt);
  }
}

// The V rows of the tile's n positions, widened into w.vt unless stored as f32.
template <DType kType>
void load_v_tile(const std::byte* const* rows, int32_t n, size_t v_offset, int64_t dim,
                 int64_t dim16, int64_t skip, const Scratch& w, const float** vrows) {
  for (int32_t j = 0; j < n; ++j) {
    const std::byte* v = rows[j] + v_offset;
    if constexpr (kType == DType::kF32) {
      vrows[j] = reinterpret_cast<const float*>(v);
    } else {
      float* dst = w.vt + j * dim16;
      if constexpr (kType == DType::kF16) {
        widen(v, dim, dst);
      } else {
        widen_q8(v, skip, dim, dst);
      }
      vrows[j] = dst;
    }
  }
}

// Scores, softmax step and weighted V of the active rows over one tile of n positions.
void attend_rows(ActiveRows& a, const float* kt, const float* const* vrows, int64_t dim,
                 float scale) {
  for (int b = 0; b < a.n; b += kRowBlock) {
    score_rows(std::min(kRowBlock, a.n - b), a.q + b, kt, dim, scale, a.s + b);
  }
  for (int i = 0; i < a.n; ++i) a.alpha[i] = softmax_row(a.s[i], a.n_pos[i], a.m[i], a.l[i]);
  for (int b = 0; b < a.n; b += kPvRows) {
    const int nr = std::min(kPvRows, a.n - b);
    const int32_t n = *std::max_element(a.n_pos + b, a.n_pos + b + nr);
    for (int64_t d0 = 0; d0 < dim; d0 += 16 * kKeyVecs) {
      const int64_t left = dim - d0;
      const int c = static_cast<int>(std::min<int64_t>(kKeyVecs, (left + 15) / 16));
      const __mmask16 last = lanes_below(left, 16 * (c - 1));
      float* const* acc = a.acc + b;
      const float* const* p = a.s + b;
      switch (c) {
        case 1:
          pv_rows<1>(nr, acc, a.alpha + b, p, n, vrows, d0, last);
          break;
        case 2:
          pv_rows<2>(nr, acc, a.alpha + b, p, n, vrows, d0, last);
          break;
        case 3:
          pv_rows<3>(nr, acc, a.alpha + b, p, n, vrows, d0, last);
          break;
        default:
          pv_rows<4>(nr, acc, a.alpha + b, p, n, vrows, d0, last);
          break;
      }
    }
  }
}

// Rows [r0, r1) of the task (at most kMaxRows) over the task's positions.
template <DType kType>
void attend_pass(const PagedKv& kv, const AttentionHeads& heads, const PagedAttentionTask& t,
                 int64_t r0, int64_t r1) {
  const int64_t group = heads.n_heads / heads.n_kv_heads, dim = heads.head_dim;
  const int64_t dim16 = (dim + 15) / 16 * 16;
  Scratch w;
  w.scores = t.scratch;
  w.kt = w.scores + group * kQueryTile * kKeyTile;
  w.vt = w.kt + dim16 * kKeyTile;
  w.kw = w.vt + kKeyTile * dim16;
  w.zeros = w.kw + kKeyTile * dim16;
  std::fill(w.zeros, w.zeros + dim16, 0.0f);
  int32_t row_end[kMaxRows];
  int32_t tile_end = t.kv_begin;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t tok = r / group;
    row_end[r - r0] = std::min(t.kv_end, t.n_kv[tok]);
    tile_end = std::max(tile_end, row_end[r - r0]);
    float* acc = t.acc + tok * t.acc_stride + (r % group) * dim;
    std::fill(acc, acc + dim, 0.0f);
    t.m[r] = -INFINITY;
    t.l[r] = 0.0f;
  }
  if (tile_end <= t.kv_begin) return;
  const HeadSpan span = paged_head_span(kv, t.kv_head, dim);
  const std::byte* tile_rows[2][kKeyTile];
  const float* vrows[kKeyTile];
  paged_k_rows(kv, t.block_table, t.kv_head, dim, t.kv_begin,
               std::min(kKeyTile, tile_end - t.kv_begin), tile_rows[0]);
  for (int32_t j0 = t.kv_begin, tile = 0; j0 < tile_end; j0 += kKeyTile, tile ^= 1) {
    const int32_t n = std::min(kKeyTile, tile_end - j0);
    const std::byte* const* rows = tile_rows[tile];
    if (const int32_t j1 = j0 + kKeyTile; j1 < tile_end) {  // the next tile's rows
      const int32_t n1 = std::min(kKeyTile, tile_end - j1);
      paged_k_rows(kv, t.block_table, t.kv_head, dim, j1, n1, tile_rows[tile ^ 1]);
      prefetch_rows(tile_rows[tile ^ 1], n1, kv.v_offset, span.bytes);
    }
    load_k_tile<kType>(rows, n, dim, dim16, span.skip, w);
    load_v_tile<kType>(rows, n, kv.v_offset, dim, dim16, span.skip, w, vrows);
    ActiveRows a;
    for (int64_t r = r0; r < r1; ++r) {
      if (row_end[r - r0] <= j0) continue;
      const int64_t tok = r / group, g = r % group;
      a.q[a.n] = t.q + tok * t.q_stride + g * dim;
      a.s[a.n] = w.scores + (r - r0) * kKeyTile;
      a.acc[a.n] = t.acc + tok * t.acc_stride + g * dim;
      a.m[a.n] = t.m + r;
      a.l[a.n] = t.l + r;
      a.n_pos[a.n] = std::min(n, row_end[r - r0] - j0);
      ++a.n;
    }
    attend_rows(a, w.kt, vrows, dim, heads.scale);
  }
}

template <DType kType>
void attend(const PagedKv& kv, const AttentionHeads& heads, const PagedAttentionTask& t) {
  const int64_t rows = t.n_tok * (heads.n_heads / heads.n_kv_heads);
  for (int64_t r0 = 0; r0 < rows; r0 += kMaxRows) {
    attend_pass<kType>(kv, heads, t, r0, std::min<int64_t>(rows, r0 + kMaxRows));
  }
}

}  // namespace

void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend<DType::kF32>(kv, heads, task);
}

void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend<DType::kF16>(kv, heads, task);
}

void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task) {
  attend<DType::kQ8_0>(kv, heads, task);
}

}  // namespace keel::kernels::avx512
