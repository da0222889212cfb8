// AVX2 decode kernels for Q4_K, Q5_K and Q6_K weights in the row-group layout (weight_layout.h)
// against Q8_K activations.
//
// Each 64-byte quad vector is two ymm halves (rows 0–7, 8–15). Per half, token and sub-block,
// `maddubs` of the unsigned quants against 4 broadcast activation bytes gives each row's int16
// pair sums in its 32-bit lane; a few are added in int16 (within range: Q4_K 8·2·15·127,
// Q5_K 4·2·31·127, Q6_K 2·2·63·127 < 2^15), and `madd` with the rows' sub-block scales as int16
// pairs widens them to exact int32 totals. The Q4_K/Q5_K mins and Q6_K's −32 offset come from
// `madd` of the rows' (scale or min) pairs against activation-sum pairs. Each super-block then
// holds the exact integer totals of the scalar reference, scaled and summed in its f32 order, so
// the kernels are bit-identical to scalar_kquant.cpp and to the row-major kernels.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/grouped_kquant_scales.h"
#include "kernels/isa_kernels.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::avx2 {
namespace {

constexpr int kMaxTokens = 2;
constexpr int64_t kPrefetchAhead = 2048;

inline __m256i load256(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m128i load128(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m256i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i pair32(int32_t lo, int32_t hi) {
  return _mm256_set1_epi32(static_cast<int32_t>(
      static_cast<uint16_t>(lo) | static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}
// Bytes 8h..8h+7 of a 16-row byte vector as int16 pairs (x, x) per 32-bit lane (signed: Q6_K).
template <bool kSigned>
inline __m256i dup_pairs(__m128i bytes, int h) {
  const __m128i b = h == 0 ? bytes : _mm_unpackhi_epi64(bytes, bytes);
  const __m128i w = kSigned ? _mm_cvtepi8_epi16(b) : _mm_cvtepu8_epi16(b);
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(w, w)),
                                 _mm_unpackhi_epi16(w, w), 1);
}
// Rows 8h..8h+7 of two 16-row byte vectors as int16 pairs (x[i], y[i]) per 32-bit lane.
template <bool kSigned>
inline __m256i zip_pairs(__m128i x, __m128i y, int h) {
  const __m128i z = h == 0 ? _mm_unpacklo_epi8(x, y) : _mm_unpackhi_epi8(x, y);
  return kSigned ? _mm256_cvtepi8_epi16(z) : _mm256_cvtepu8_epi16(z);
}
inline __m256 half_floats(const std::byte* p) { return _mm256_cvtph_ps(load128(p)); }

struct TokenBlock {
  const int8_t* q;
  const int16_t* bsums;
  float d;
};

// Q4_K / Q5_K super-block: sum[h][t] += its contribution for rows 8h.. and tokens t.
template <bool kQ5, int kT>
inline void super_block_k45(const std::byte* blk, const TokenBlock* a, __m256 (*sum)[kT]) {
  __m128i sc[8], m[8];
  unpack_k45_scale_bytes(blk, sc, m);
  const std::byte* qs = blk + (kQ5 ? 768 : 256);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    __m256i isum[kT], msum[kT];
    for (int t = 0; t < kT; ++t) isum[t] = msum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i s_lo = dup_pairs<false>(sc[2 * c], h),
                    s_hi = dup_pairs<false>(sc[2 * c + 1], h);
      __m256i pl[kT][2], ph[kT][2];  // int16 sums of quads 0–3 and 4–7 (Q5_K's range limit)
      for (int t = 0; t < kT; ++t)
        pl[t][0] = pl[t][1] = ph[t][0] = ph[t][1] = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        const __m256i v = load256(qs + 64 * (8 * c + j) + 32 * h);
        __m256i lo = _mm256_and_si256(v, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        if constexpr (kQ5) {  // qh quad j: bit 2c → +16 (lo), bit 2c+1 → +16 (hi)
          const __m256i qh = load256(blk + 256 + 64 * j + 32 * h);
          const __m256i bl = _mm256_set1_epi8(static_cast<char>(1 << 2 * c));
          const __m256i bh = _mm256_set1_epi8(static_cast<char>(1 << (2 * c + 1)));
          const __m256i sixteen = _mm256_set1_epi8(16);
          lo = _mm256_add_epi8(
              lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bl), bl), sixteen));
          hi = _mm256_add_epi8(
              hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, bh), bh), sixteen));
        }
        for (int t = 0; t < kT; ++t) {
          pl[t][j / 4] = _mm256_add_epi16(
              pl[t][j / 4], _mm256_maddubs_epi16(lo, bcast4(a[t].q + 64 * c + 4 * j)));
          ph[t][j / 4] = _mm256_add_epi16(
              ph[t][j / 4], _mm256_maddubs_epi16(hi, bcast4(a[t].q + 64 * c + 32 + 4 * j)));
        }
      }
      for (int t = 0; t < kT; ++t) {
        for (int k = 0; k < 2; ++k) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(pl[t][k], s_lo));
          isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(ph[t][k], s_hi));
        }
      }
    }
    for (int t = 0; t < kT; ++t) {
      for (int p = 0; p < 4; ++p) {  // Σ m_s · (activation sum over sub-block s)
        const int16_t* bs = a[t].bsums + 4 * p;
        msum[t] =
            _mm256_add_epi32(msum[t], _mm256_madd_epi16(zip_pairs<false>(m[2 * p], m[2 * p + 1], h),
                                                        pair32(bs[0] + bs[1], bs[2] + bs[3])));
      }
      const __m256 da = _mm256_set1_ps(a[t].d);
      const __m256 d = _mm256_mul_ps(half_floats(blk + 16 * h), da);
      const __m256 dmin = _mm256_mul_ps(half_floats(blk + 32 + 16 * h), da);
      const __m256 v = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(isum[t])),
                                     _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(msum[t])));
      sum[h][t] = _mm256_add_ps(sum[h][t], v);
    }
  }
}

// Q6_K super-block (vectors at 192·(8h' + j) for half h' of the super-block and quad j).
template <int kT>
inline void super_block_q6(const std::byte* blk, const TokenBlock* a, __m256 (*sum)[kT]) {
  const __m256i low4 = _mm256_set1_epi8(0x0f), bits45 = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {  // rows 8h..8h+7
    __m256i isum[kT];
    for (int t = 0; t < kT; ++t) isum[t] = _mm256_setzero_si256();
    for (int sh = 0; sh < 2; ++sh) {    // 128-element half of the super-block
      for (int jh = 0; jh < 2; ++jh) {  // quads 4jh..4jh+3: sub-blocks 8sh + 2o + jh
        __m256i p[kT][4][2];
        for (int t = 0; t < kT; ++t) {
          for (int o = 0; o < 4; ++o) p[t][o][0] = p[t][o][1] = _mm256_setzero_si256();
        }
        for (int j = 4 * jh; j < 4 * jh + 4; ++j) {
          const std::byte* q = blk + 192 * (8 * sh + j) + 32 * h;
          const __m256i la = load256(q), lb = load256(q + 64), qh = load256(q + 128);
          __m256i v[4];
          v[0] = _mm256_or_si256(_mm256_and_si256(la, low4),
                                 _mm256_and_si256(_mm256_slli_epi16(qh, 4), bits45));
          v[1] = _mm256_or_si256(_mm256_and_si256(lb, low4),
                                 _mm256_and_si256(_mm256_slli_epi16(qh, 2), bits45));
          v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(la, 4), low4),
                                 _mm256_and_si256(qh, bits45));
          v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lb, 4), low4),
                                 _mm256_and_si256(_mm256_srli_epi16(qh, 2), bits45));
          for (int t = 0; t < kT; ++t) {
            for (int o = 0; o < 4; ++o) {
              __m256i& acc = p[t][o][(j - 4 * jh) / 2];
              acc = _mm256_add_epi16(
                  acc, _mm256_maddubs_epi16(v[o], bcast4(a[t].q + 128 * sh + 32 * o + 4 * j)));
            }
          }
        }
        for (int o = 0; o < 4; ++o) {
          const __m256i s = dup_pairs<true>(load128(blk + 3072 + 16 * (8 * sh + 2 * o + jh)), h);
          for (int t = 0; t < kT; ++t) {
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p[t][o][0], s));
            isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(p[t][o][1], s));
          }
        }
      }
    }
    for (int t = 0; t < kT; ++t) {
      __m256i off = _mm256_setzero_si256();  // Σ_s scale_s · bsum_s, then ·32
      for (int k = 0; k < 8; ++k) {
        const __m256i sp =
            zip_pairs<true>(load128(blk + 3072 + 32 * k), load128(blk + 3072 + 32 * k + 16), h);
        off = _mm256_add_epi32(
            off, _mm256_madd_epi16(sp, pair32(a[t].bsums[2 * k], a[t].bsums[2 * k + 1])));
      }
      const __m256i total = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(off, 5));
      const __m256 d = _mm256_mul_ps(half_floats(blk + 3328 + 16 * h), _mm256_set1_ps(a[t].d));
      sum[h][t] = _mm256_add_ps(sum[h][t], _mm256_mul_ps(d, _mm256_cvtepi32_ps(total)));
    }
  }
}

template <int kType, int kT>
void group_tile(const MatmulTask& task, const std::byte* g, int64_t t0, float* y, int valid) {
  constexpr int64_t kBytes = kGroupRows * (kType == 4   ? kQ4_KBytes
                                           : kType == 5 ? kQ5_KBytes
                                                        : kQ6_KBytes);
  const int64_t nb = task.w.cols / kQKK;
  __m256 sum[2][kT];
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < kT; ++t) sum[h][t] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = g + b * kBytes;
    for (int64_t off = 0; off < kBytes; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(blk) + kPrefetchAhead + off, _MM_HINT_T0);
    }
    TokenBlock a[kT];
    for (int t = 0; t < kT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      a[t] = {task.q8k.qs + tb * kQKK, task.q8k.bsums + tb * 16, task.q8k.d[tb]};
    }
    if constexpr (kType == 6) {
      super_block_q6<kT>(blk, a, sum);
    } else {
      super_block_k45<kType == 5, kT>(blk, a, sum);
    }
  }
  for (int t = 0; t < kT; ++t) {
    float* yt = y + (t0 + t) * task.w.rows;
    alignas(32) float tmp[kGroupRows];
    _mm256_store_ps(tmp, sum[0][t]);
    _mm256_store_ps(tmp + 8, sum[1][t]);
    for (int i = 0; i < valid; ++i) yt[i] = tmp[i];
  }
}

template <int kType>
void dispatch(const MatmulTask& task, int64_t row_begin, int64_t row_end, MatmulFn row_major) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) {
    row_major(task, row_begin > full ? row_begin : full, row_end);
    row_end = full;
  }
  const int64_t group_bytes = kGroupRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    const int valid = static_cast<int>(row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows);
    const std::byte* g = task.w.data + r0 / kGroupRows * group_bytes;
    int64_t t = 0;
    for (; t + kMaxTokens <= task.n_tokens; t += kMaxTokens) {
      group_tile<kType, kMaxTokens>(task, g, t, task.y + r0, valid);
    }
    if (t < task.n_tokens) group_tile<kType, 1>(task, g, t, task.y + r0, valid);
  }
}

}  // namespace

void grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<4>(task, row_begin, row_end, matmul_q4_k);
}
void grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<5>(task, row_begin, row_end, matmul_q5_k);
}
void grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<6>(task, row_begin, row_end, matmul_q6_k);
}

}  // namespace keel::kernels::avx2
