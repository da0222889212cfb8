// AVX-512 paged-attention work unit, the twin of scalar_attention.cpp: the same tiles of
// kAttentionTile positions and online-softmax updates, with 16-wide FMA dot products (q·k), a
// polynomial e^x (avx512_math.h) over each tile's scores, and the weighted V sum held in up to 8
// independent accumulators (128 floats of a head) per pass over the tile. f16 rows are widened
// with vcvtph2ps; head_dim tails use masked loads and stores.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/avx512_math.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_rows.h"

namespace keel::kernels::avx512 {
namespace {

constexpr __mmask16 kAll = 0xffff;

// 16 elements of a row starting at element d (lanes outside `mask` are zero), widened to f32.
template <bool kF16>
inline __m512 load16(const std::byte* row, int64_t d, __mmask16 mask = kAll) {
  if constexpr (kF16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, row + d * 2));
  } else {
    return _mm512_maskz_loadu_ps(mask, row + d * 4);
  }
}

template <bool kF16>
inline float dot(const float* q, const std::byte* k, int64_t dim) {
  __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
  int64_t d = 0;
  for (; d + 32 <= dim; d += 32) {
    a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d), load16<kF16>(k, d), a0);
    a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q + d + 16), load16<kF16>(k, d + 16), a1);
  }
  for (; d < dim; d += 16) {
    const __mmask16 m = dim - d >= 16 ? kAll : tail_mask(dim - d);
    a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), load16<kF16>(k, d, m), a0);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// Turns the n scores of a tile into weights p = e^(s − m_new) (zero past n) in place; returns
// their sum. Entries [n, kAttentionTile) of p are overwritten.
inline float exp_tile(float* p, int32_t n, float m_new) {
  static_assert(kAttentionTile % 16 == 0);
  const __m512 vm = _mm512_set1_ps(m_new);
  __m512 sum = _mm512_setzero_ps();
  for (int32_t j = 0; j < kAttentionTile; j += 16) {
    const __mmask16 keep = n - j >= 16 ? kAll : (n > j ? tail_mask(n - j) : 0);
    const __m512 e = _mm512_maskz_mov_ps(keep, exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p + j), vm)));
    _mm512_storeu_ps(p + j, e);
    sum = _mm512_add_ps(sum, e);
  }
  return _mm512_reduce_add_ps(sum);
}

// acc[0, 16·kChunks) = alpha·acc + Σ_j p[j]·v_j[d0, d0 + 16·kChunks), v_j = rows[j] + v_offset;
// the last chunk covers only the lanes of `last`.
template <int kChunks, bool kF16>
inline void weighted_v(float* acc, float alpha, const float* p, int32_t n,
                       const std::byte* const* rows, size_t v_offset, int64_t d0,
                       __mmask16 last = kAll) {
  __m512 a[kChunks];
  const __m512 va = _mm512_set1_ps(alpha);
  for (int c = 0; c < kChunks; ++c) {
    const __mmask16 m = c + 1 == kChunks ? last : kAll;
    a[c] = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc + 16 * c), va);
  }
  for (int32_t j = 0; j < n; ++j) {
    const __m512 pj = _mm512_set1_ps(p[j]);
    const std::byte* v = rows[j] + v_offset;
    for (int c = 0; c < kChunks; ++c) {
      const __mmask16 m = c + 1 == kChunks ? last : kAll;
      a[c] = _mm512_fmadd_ps(pj, load16<kF16>(v, d0 + 16 * c, m), a[c]);
    }
  }
  for (int c = 0; c < kChunks; ++c) {
    _mm512_mask_storeu_ps(acc + 16 * c, c + 1 == kChunks ? last : kAll, a[c]);
  }
}

template <bool kF16>
void accumulate_v(float* acc, float alpha, const float* p, int32_t n, const std::byte* const* rows,
                  size_t v_offset, int64_t dim) {
  int64_t d = 0;
  for (; d + 128 <= dim; d += 128) weighted_v<8, kF16>(acc + d, alpha, p, n, rows, v_offset, d);
  if (d + 64 <= dim) {
    weighted_v<4, kF16>(acc + d, alpha, p, n, rows, v_offset, d);
    d += 64;
  }
  for (; d < dim; d += 16) {
    const __mmask16 m = dim - d >= 16 ? kAll : tail_mask(dim - d);
    weighted_v<1, kF16>(acc + d, alpha, p, n, rows, v_offset, d, m);
  }
}

template <bool kF16>
void attend(const PagedKv& kv, const AttentionHeads& heads, const PagedAttentionTask& t) {
  const int64_t group = heads.n_heads / heads.n_kv_heads;
  const int64_t dim = heads.head_dim;
  std::fill(t.acc, t.acc + group * dim, 0.0f);
  std::fill(t.m, t.m + group, -INFINITY);
  std::fill(t.l, t.l + group, 0.0f);
  const std::byte* rows[kAttentionTile];
  for (int32_t j0 = t.kv_begin; j0 < t.kv_end; j0 += kAttentionTile) {
    const int32_t n = std::min(kAttentionTile, t.kv_end - j0);
    paged_k_rows(kv, t.block_table, t.kv_head, dim, j0, n, rows);
    for (int32_t j = 0; j < n; ++j) {
      for (int64_t g = 0; g < group; ++g) {
        t.scratch[g * kAttentionTile + j] = dot<kF16>(t.q + g * dim, rows[j], dim) * heads.scale;
      }
    }
    for (int64_t g = 0; g < group; ++g) {
      float* p = t.scratch + g * kAttentionTile;
      __m512 mx = _mm512_set1_ps(-INFINITY);
      for (int32_t j = 0; j < n; j += 16) {
        const __mmask16 m = n - j >= 16 ? kAll : tail_mask(n - j);
        mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, p + j));
      }
      const float m_new = std::max(t.m[g], _mm512_reduce_max_ps(mx));
      const float alpha = t.m[g] == -INFINITY ? 0.0f : std::exp(t.m[g] - m_new);
      t.l[g] = t.l[g] * alpha + exp_tile(p, n, m_new);
      t.m[g] = m_new;
      accumulate_v<kF16>(t.acc + g * dim, alpha, p, n, rows, kv.v_offset, dim);
    }
  }
}

}  // namespace

void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend<false>(kv, heads, task);
}

void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend<true>(kv, heads, task);
}

}  // namespace keel::kernels::avx512
