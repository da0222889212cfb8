// AVX2 paged-attention work unit, the twin of scalar_attention.cpp (same tiles of kAttentionTile
// positions and online-softmax updates). Per tile: f16 and Q8_0 K/V rows of the KV head are
// widened once into scratch (F16C; Q8_0 as scale · q); scores of each query head are computed 8
// positions at a time (8 dot-product accumulators sharing the query chunk, then one
// transpose-reduction to the 8 scores); a polynomial e^x (avx2_math.h) turns a head's scores into
// weights; the weighted V sum keeps up to 64 floats of the head's accumulator in registers per pass
// over the tile. head_dim tails run scalar code.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx2_math.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_attention_tiles.h"

namespace keel::kernels::avx2 {
namespace {

constexpr int32_t kLanes = 8;
static_assert(kAttentionTile % kLanes == 0);

// Lane i of the result = the sum of the lanes of a[i].
inline __m256 reduce8(const __m256* a) {
  __m256 b[4];
  for (int i = 0; i < 4; ++i) {  // per 128-bit half: [a0₀+a0₂, a1₀+a1₂, a0₁+a0₃, a1₁+a1₃]
    b[i] = _mm256_add_ps(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  __m256 c[2];
  for (int i = 0; i < 2; ++i) {  // per 128-bit half: the half-sums of a[4i .. 4i+3]
    c[i] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20),
                       _mm256_permute2f128_ps(c[0], c[1], 0x31));
}

// This file's arithmetic for the shared tile loop (paged_attention_tiles.h).
struct Tile {
  static constexpr int32_t kLanes = avx2::kLanes;

  // s[i] = scale · q·k_i for the 8 rows k_i = krows[i].
  static void scores(const float* q, const float* const* krows, int64_t dim, float scale,
                     float* s) {
    __m256 acc[kLanes];
    for (auto& a : acc) a = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= dim; d += 8) {
      const __m256 qc = _mm256_loadu_ps(q + d);
      for (int i = 0; i < kLanes; ++i) {
        acc[i] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(krows[i] + d), acc[i]);
      }
    }
    __m256 r = reduce8(acc);
    if (d < dim) {
      alignas(32) float t[kLanes];
      _mm256_store_ps(t, r);
      for (int i = 0; i < kLanes; ++i) {
        for (int64_t e = d; e < dim; ++e) t[i] += q[e] * krows[i][e];
      }
      r = _mm256_load_ps(t);
    }
    _mm256_storeu_ps(s, _mm256_mul_ps(r, _mm256_set1_ps(scale)));
  }

  static float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
  }

  // The largest of the n scores p[0, n).
  static float tile_max(const float* p, int32_t n) {
    __m256 mx = _mm256_set1_ps(-INFINITY);
    int32_t j = 0;
    for (; j + kLanes <= n; j += kLanes) mx = _mm256_max_ps(mx, _mm256_loadu_ps(p + j));
    float m = hmax(mx);
    for (; j < n; ++j) m = std::max(m, p[j]);
    return m;
  }

  // Turns the n scores of a tile into weights p = e^(s − m_new) in place (zero in [n, n rounded up
  // to 8)); returns their sum.
  static float exp_tile(float* p, int32_t n, float m_new) {
    const __m256 vm = _mm256_set1_ps(m_new);
    const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    __m256 sum = _mm256_setzero_ps();
    for (int32_t j = 0; j < n; j += kLanes) {
      const __m256 keep = _mm256_cmp_ps(_mm256_add_ps(lane, _mm256_set1_ps(static_cast<float>(j))),
                                        _mm256_set1_ps(static_cast<float>(n)), _CMP_LT_OQ);
      const __m256 e = _mm256_and_ps(exp_ps(_mm256_sub_ps(_mm256_loadu_ps(p + j), vm)), keep);
      _mm256_storeu_ps(p + j, e);
      sum = _mm256_add_ps(sum, e);
    }
    return hsum(sum);
  }

  // acc[0, 8·kChunks) = alpha·acc + Σ_j p[j]·v_j[d0, d0 + 8·kChunks) with v_j = vrows[j]. Positions
  // alternate between kStreams sets of accumulators so that at least 8 FMA chains are in flight.
  template <int kChunks>
  static void weighted_v(float* acc, float alpha, const float* p, int32_t n,
                         const float* const* vrows, int64_t d0) {
    constexpr int kStreams = kChunks >= 8 ? 1 : 8 / kChunks;
    __m256 a[kStreams][kChunks];
    for (int s = 0; s < kStreams; ++s) {
      for (int c = 0; c < kChunks; ++c) a[s][c] = _mm256_setzero_ps();
    }
    int32_t j = 0;
    for (; j + kStreams <= n; j += kStreams) {
      for (int s = 0; s < kStreams; ++s) {
        const __m256 pj = _mm256_broadcast_ss(p + j + s);
        const float* v = vrows[j + s] + d0;
        for (int c = 0; c < kChunks; ++c)
          a[s][c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * c), a[s][c]);
      }
    }
    for (; j < n; ++j) {
      const auto pj = _mm256_broadcast_ss(p + j);
      const float* v = vrows[j] + d0;
      for (int c = 0; c < kChunks; ++c)
        a[0][c] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(v + 8 * c), a[0][c]);
    }
    const __m256 va = _mm256_set1_ps(alpha);
    for (int c = 0; c < kChunks; ++c) {
      __m256 sum = a[0][c];
      for (int s = 1; s < kStreams; ++s) sum = _mm256_add_ps(sum, a[s][c]);
      _mm256_storeu_ps(acc + 8 * c, _mm256_fmadd_ps(_mm256_loadu_ps(acc + 8 * c), va, sum));
    }
  }

  static void accumulate_v(float* acc, float alpha, const float* p, int32_t n,
                           const float* const* vrows, int64_t dim) {
    int64_t d = 0;
    for (; d + 64 <= dim; d += 64) weighted_v<8>(acc + d, alpha, p, n, vrows, d);
    if (d + 32 <= dim) {
      weighted_v<4>(acc + d, alpha, p, n, vrows, d);
      d += 32;
    }
    for (; d + 8 <= dim; d += 8) weighted_v<1>(acc + d, alpha, p, n, vrows, d);
    for (; d < dim; ++d) {
      float s = acc[d] * alpha;
      for (int32_t j = 0; j < n; ++j) s += p[j] * vrows[j][d];
      acc[d] = s;
    }
  }

  // dim f16 values at src → f32 at dst.
  static void widen(const std::byte* src, int64_t dim, float* dst) {
    const auto* h = reinterpret_cast<const uint16_t*>(src);
    int64_t d = 0;
    for (; d + 8 <= dim; d += 8) {
      _mm256_storeu_ps(dst + d,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + d))));
    }
    for (; d < dim; ++d) {
      uint16_t x;
      std::memcpy(&x, h + d, 2);
      dst[d] = _cvtsh_ss(x);
    }
  }

  // dim Q8_0 values starting `skip` values into the block at src → f32 (scale · q) at dst.
  static void widen_q8(const std::byte* src, int64_t skip, int64_t dim, float* dst) {
    for (int64_t d = 0; d < dim; src += kQ8BlockBytes, skip = 0) {
      uint16_t h;
      std::memcpy(&h, src, 2);
      const float scale = _cvtsh_ss(h);
      const __m256 vs = _mm256_set1_ps(scale);
      const auto* qs = reinterpret_cast<const int8_t*>(src + 2) + skip;
      const int64_t n = std::min(kQ8Values - skip, dim - d);
      int64_t j = 0;
      for (; j + 8 <= n; j += 8) {
        const __m256i q =
            _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(qs + j)));
        _mm256_storeu_ps(dst + d + j, _mm256_mul_ps(_mm256_cvtepi32_ps(q), vs));
      }
      for (; j < n; ++j) dst[d + j] = scale * static_cast<float>(qs[j]);
      d += n;
    }
  }
};

}  // namespace

void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend_tiles<Tile, DType::kF32>(kv, heads, t); });
}

void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend_tiles<Tile, DType::kF16>(kv, heads, t); });
}

void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task) {
  attend_each_token(task, heads.n_heads / heads.n_kv_heads, heads.head_dim,
                    [&](const TokenTask& t) { attend_tiles<Tile, DType::kQ8_0>(kv, heads, t); });
}

}  // namespace keel::kernels::avx2
