// AVX-512 paged-attention work unit, the twin of scalar_attention.cpp (same tiles of
// kAttentionTile positions and online-softmax updates). Per tile: f16 and Q8_0 K/V rows of the KV
// head are widened once into scratch (vcvtph2ps; Q8_0 as scale · q); scores of each query head are
// computed 16 positions at a time (16 dot-product accumulators sharing the query chunk, then one
// transpose-reduction to the 16 scores); a polynomial e^x (avx512_math.h) turns a head's scores
// into weights; the weighted V sum keeps up to 128 floats of the head's accumulator in registers
// per pass over the tile. head_dim tails use masked loads and stores.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/avx512_math.h"
#include "kernels/isa_kernels.h"
#include "kernels/paged_attention_tiles.h"

namespace keel::kernels::avx512 {
namespace {

constexpr int32_t kLanes = 16;
constexpr __mmask16 kAll = 0xffff;
static_assert(kAttentionTile % kLanes == 0);

// Lane i of the result = the sum of the lanes of a[i].
inline __m512 reduce16(const __m512* a) {
  __m512 b[8];
  for (int i = 0; i < 8; ++i) {  // per 128-bit lane: pair sums of a[2i] and a[2i+1]
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  __m512 c[4];
  for (int i = 0; i < 4; ++i) {  // per 128-bit lane: the lane sums of a[4i .. 4i+3]
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 d[2];
  for (int i = 0; i < 2; ++i) {  // lanes (0+2, 1+3) of c[2i], then of c[2i+1]
    d[i] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(c[2 * i], c[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

// This file's arithmetic for the shared tile loop (paged_attention_tiles.h).
struct Tile {
  static constexpr int32_t kLanes = avx512::kLanes;

  // s[i] = scale · q·k_i for the 16 rows k_i = krows[i].
  static void scores(const float* q, const float* const* krows, int64_t dim, float scale,
                     float* s) {
    __m512 acc[kLanes];
    for (auto& a : acc) a = _mm512_setzero_ps();
    int64_t d = 0;
    for (; d + 16 <= dim; d += 16) {
      const __m512 qc = _mm512_loadu_ps(q + d);
      for (int i = 0; i < kLanes; ++i) {
        acc[i] = _mm512_fmadd_ps(qc, _mm512_loadu_ps(krows[i] + d), acc[i]);
      }
    }
    if (d < dim) {
      const __mmask16 m = tail_mask(dim - d);
      const __m512 qc = _mm512_maskz_loadu_ps(m, q + d);
      for (int i = 0; i < kLanes; ++i) {
        acc[i] = _mm512_fmadd_ps(qc, _mm512_maskz_loadu_ps(m, krows[i] + d), acc[i]);
      }
    }
    _mm512_storeu_ps(s, _mm512_mul_ps(reduce16(acc), _mm512_set1_ps(scale)));
  }

  static __mmask16 lanes_below(int32_t n, int32_t j) {
    return n - j >= kLanes ? kAll : (n > j ? tail_mask(n - j) : static_cast<__mmask16>(0));
  }

  // The largest of the n scores p[0, n).
  static float tile_max(const float* p, int32_t n) {
    __m512 mx = _mm512_set1_ps(-INFINITY);
    for (int32_t j = 0; j < n; j += kLanes) {
      const __mmask16 m = lanes_below(n, j);
      mx = _mm512_mask_max_ps(mx, m, mx, _mm512_maskz_loadu_ps(m, p + j));
    }
    return _mm512_reduce_max_ps(mx);
  }

  // Turns the n scores of a tile into weights p = e^(s − m_new) in place (zero in [n, n rounded up
  // to 16)); returns their sum.
  static float exp_tile(float* p, int32_t n, float m_new) {
    const __m512 vm = _mm512_set1_ps(m_new);
    __m512 sum = _mm512_setzero_ps();
    for (int32_t j = 0; j < n; j += kLanes) {
      const __m512 e =
          _mm512_maskz_mov_ps(lanes_below(n, j), exp_ps(_mm512_sub_ps(_mm512_loadu_ps(p + j), vm)));
      _mm512_storeu_ps(p + j, e);
      sum = _mm512_add_ps(sum, e);
    }
    return _mm512_reduce_add_ps(sum);
  }

  // acc[0, 16·kChunks) = alpha·acc + Σ_j p[j]·v_j[d0, d0 + 16·kChunks) with v_j = vrows[j].
  // Positions alternate between kStreams sets of accumulators so that at least 8 FMA chains are in
  // flight.
  template <int kChunks>
  static void weighted_v(float* acc, float alpha, const float* p, int32_t n,
                         const float* const* vrows, int64_t d0) {
    constexpr int kStreams = kChunks >= 8 ? 1 : 8 / kChunks;
    __m512 a[kStreams][kChunks];
    for (int s = 0; s < kStreams; ++s) {
      for (int c = 0; c < kChunks; ++c) a[s][c] = _mm512_setzero_ps();
    }
    int32_t j = 0;
    for (; j + kStreams <= n; j += kStreams) {
      for (int s = 0; s < kStreams; ++s) {
        const __m512 pj = _mm512_set1_ps(p[j + s]);
        const float* v = vrows[j + s] + d0;
        for (int c = 0; c < kChunks; ++c)
          a[s][c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * c), a[s][c]);
      }
    }
    for (; j < n; ++j) {
      const auto pj = _mm512_set1_ps(p[j]);
      const float* v = vrows[j] + d0;
      for (int c = 0; c < kChunks; ++c)
        a[0][c] = _mm512_fmadd_ps(pj, _mm512_loadu_ps(v + 16 * c), a[0][c]);
    }
    const __m512 va = _mm512_set1_ps(alpha);
    for (int c = 0; c < kChunks; ++c) {
      __m512 sum = a[0][c];
      for (int s = 1; s < kStreams; ++s) sum = _mm512_add_ps(sum, a[s][c]);
      _mm512_storeu_ps(acc + 16 * c, _mm512_fmadd_ps(_mm512_loadu_ps(acc + 16 * c), va, sum));
    }
  }

  // The last, partial chunk of a head: lanes of `m` only.
  static void weighted_v_tail(float* acc, float alpha, const float* p, int32_t n,
                              const float* const* vrows, int64_t d0, __mmask16 m) {
    __m512 a = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, acc), _mm512_set1_ps(alpha));
    for (int32_t j = 0; j < n; ++j) {
      a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), _mm512_maskz_loadu_ps(m, vrows[j] + d0), a);
    }
    _mm512_mask_storeu_ps(acc, m, a);
  }

  static void accumulate_v(float* acc, float alpha, const float* p, int32_t n,
                           const float* const* vrows, int64_t dim) {
    int64_t d = 0;
    for (; d + 128 <= dim; d += 128) weighted_v<8>(acc + d, alpha, p, n, vrows, d);
    if (d + 64 <= dim) {
      weighted_v<4>(acc + d, alpha, p, n, vrows, d);
      d += 64;
    }
    for (; d + 16 <= dim; d += 16) weighted_v<1>(acc + d, alpha, p, n, vrows, d);
    if (d < dim) weighted_v_tail(acc + d, alpha, p, n, vrows, d, tail_mask(dim - d));
  }

  // dim f16 values at src → f32 at dst.
  static void widen(const std::byte* src, int64_t dim, float* dst) {
    for (int64_t d = 0; d < dim; d += 16) {
      const __mmask16 m = dim - d >= 16 ? kAll : tail_mask(dim - d);
      _mm512_mask_storeu_ps(dst + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + d * 2)));
    }
  }

  // dim Q8_0 values starting `skip` values into the block at src → f32 (scale · q) at dst.
  static void widen_q8(const std::byte* src, int64_t skip, int64_t dim, float* dst) {
    for (int64_t d = 0; d < dim; src += kQ8BlockBytes, skip = 0) {
      uint16_t h;
      std::memcpy(&h, src, 2);
      const __m512 vs = _mm512_set1_ps(_cvtsh_ss(h));
      const auto* qs = reinterpret_cast<const int8_t*>(src + 2) + skip;
      const int64_t n = std::min(kQ8Values - skip, dim - d);
      for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 m = n - j >= 16 ? kAll : tail_mask(n - j);
        const __m512i q = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, qs + j));
        _mm512_mask_storeu_ps(dst + d + j, m, _mm512_mul_ps(_mm512_cvtepi32_ps(q), vs));
      }
      d += n;
    }
  }
};

}  // namespace

void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_tiles<Tile, DType::kF32>(kv, heads, task);
}

void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task) {
  attend_tiles<Tile, DType::kF16>(kv, heads, task);
}

void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task) {
  attend_tiles<Tile, DType::kQ8_0>(kv, heads, task);
}

}  // namespace keel::kernels::avx512
