// AVX2 paged-attention work unit, the twin of scalar_attention.cpp: the same tiles of
// kAttentionTile positions and online-softmax updates, with 8-wide FMA dot products (q·k), a
// polynomial e^x (avx2_math.h) over each tile's scores, and the weighted V sum held in up to 8
// independent accumulators (64 floats of a head) per pass over the tile. f16 rows are widened
// with F16C. head_dim tails run scalar code.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2_math.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_rows.h"

namespace keel::kernels::avx2 {
namespace {

// 8 elements of a row starting at element d, widened to f32.
template <bool kF16>
inline __m256 load8(const std::byte* row, int64_t d) {
  if constexpr (kF16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + d * 2)));
  } else {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row + d * 4));
  }
}

template <bool kF16>
inline float load1(const std::byte* row, int64_t d) {
  if constexpr (kF16) {
    uint16_t h;
    std::memcpy(&h, row + d * 2, 2);
    return _cvtsh_ss(h);
  } else {
    float f;
    std::memcpy(&f, row + d * 4, 4);
    return f;
  }
}

template <bool kF16>
inline float dot(const float* q, const std::byte* k, int64_t dim) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 16 <= dim; d += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<kF16>(k, d), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), load8<kF16>(k, d + 8), a1);
  }
  if (d + 8 <= dim) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), load8<kF16>(k, d), a0);
    d += 8;
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; d < dim; ++d) s += q[d] * load1<kF16>(k, d);
  return s;
}

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// Turns the n scores of a tile into weights p = e^(s − m_new) (zero past n) in place; returns
// their sum. Entries [n, kAttentionTile) of p are overwritten.
inline float exp_tile(float* p, int32_t n, float m_new) {
  const __m256 vm = _mm256_set1_ps(m_new);
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  __m256 sum = _mm256_setzero_ps();
  for (int32_t j = 0; j < kAttentionTile; j += 8) {
    const __m256 keep = _mm256_cmp_ps(_mm256_add_ps(lane, _mm256_set1_ps(static_cast<float>(j))),
                                      _mm256_set1_ps(static_cast<float>(n)), _CMP_LT_OQ);
    const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm)), keep);
    _mm256_storeu_ps(p + j, e);
    sum = _mm256_add_ps(sum, e);
  }
  return hsum(sum);
}

// acc[0, 8·kChunks) = alpha·acc + Σ_j p[j]·v_j[d0, d0 + 8·kChunks), v_j = rows[j] + v_offset.
template <int kChunks, bool kF16>
inline void weighted_v(float* acc, float alpha, const float* p, int32_t n,
                       const std::byte* const* rows, size_t v_offset, int64_t d0) {
  __m256 a[kChunks];
  const __m256 va = _mm256_set1_ps(alpha);
  for (int c = 0; c < kChunks; ++c) a[c] = _mm256_mul_ps(_mm256_loadu_ps(acc + 8 * c), va);
  for (int32_t j = 0; j < n; ++j) {
    const __m256 pj = _mm256_set1_ps(p[j]);
    const std::byte* v = rows[j] + v_offset;
    for (int c = 0; c < kChunks; ++c) {
      a[c] = _mm256_fmadd_ps(pj, load8<kF16>(v, d0 + 8 * c), a[c]);
    }
  }
  for (int c = 0; c < kChunks; ++c) _mm256_storeu_ps(acc + 8 * c, a[c]);
}

template <bool kF16>
void accumulate_v(float* acc, float alpha, const float* p, int32_t n, const std::byte* const* rows,
                  size_t v_offset, int64_t dim) {
  int64_t d = 0;
  for (; d + 64 <= dim; d += 64) weighted_v<8, kF16>(acc + d, alpha, p, n, rows, v_offset, d);
  if (d + 32 <= dim) {
    weighted_v<4, kF16>(acc + d, alpha, p, n, rows, v_offset, d);
    d += 32;
  }
  for (; d + 8 <= dim; d += 8) weighted_v<1, kF16>(acc + d, alpha, p, n, rows, v_offset, d);
  for (; d < dim; ++d) {
    float s = acc[d] * alpha;
    for (int32_t j = 0; j < n; ++j) s += p[j] * load1<kF16>(rows[j] + v_offset, d);
    acc[d] = s;
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
      __m256 mx = _mm256_set1_ps(-INFINITY);
      int32_t j = 0;
      for (; j + 8 <= n; j += 8) mx = _mm256_max_ps(mx, _mm256_loadu_ps(p + j));
      float tile_max = hmax(mx);
      for (; j < n; ++j) tile_max = std::max(tile_max, p[j]);
      const float m_new = std::max(t.m[g], tile_max);
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

}  // namespace keel::kernels::avx2
