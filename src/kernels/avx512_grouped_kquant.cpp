// AVX-512 + VNNI decode kernels for Q4_K, Q5_K and Q6_K weights in the row-group layout
// (weight_layout.h, avx512_grouped_kquant.h) against Q8_K activations.
//
// Per super-block of a 16-row group: the quant vectors are read once (64 bytes = 4 quants of
// each of the 16 rows) and, per token, `vpdpbusd` with 4 broadcast activation bytes accumulates
// the 16 rows' sub-block dots in int32 lanes; `vpmulld` applies the rows' sub-block scales; the
// Q4_K/Q5_K mins come from 4 `vpdpwssd` against the activation-sum pairs, Q6_K's −32 offset from
// starting each sub-block dot at −32·bsum. Each super-block ends with the exact integer totals of
// the scalar reference (scalar_kquant.cpp), scaled and summed in the same f32 order — the kernels
// are bit-identical to it, to the row-major kernels and to the GEMM. No horizontal reductions; one
// sequential stream of weight bytes. Calls with kKQuantGemmMinTokens tokens or more go to the
// grouped GEMM; rows past the last full group (row-major) to the row-major kernels.
//
// Pure functions; thread-safe.
#include "kernels/avx512_grouped_kquant.h"

#include <cstring>

#include "core/check.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {
namespace {

inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// One token's view of a super-block's activations.
struct TokenBlock {
  const int8_t* q;       // 256 quants
  const int16_t* bsums;  // 16 sums of 16
  float d;
};

inline TokenBlock token_block(const MatmulTask& task, int64_t tok, int64_t b) {
  const int64_t nb = task.w.cols / kQKK, tb = tok * nb + b;
  return {task.q8k.qs + tb * kQKK, task.q8k.bsums + tb * 16, task.q8k.d[tb]};
}

// Q4_K / Q5_K: sum[t] += the super-block at `blk` for kT tokens.
template <bool kQ5, int kT>
inline void super_block_k45(const std::byte* blk, const TokenBlock* a, __m512* sum) {
  GroupScalesK45 s;
  load_scales_k45(blk, &s);
  __m512i isum[kT];
  for (int t = 0; t < kT; ++t) isum[t] = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    __m512i dl[kT], dh[kT];
    for (int t = 0; t < kT; ++t) dl[t] = dh[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      __m512i lo, hi;
      k45_values<kQ5>(blk, 8 * c + j, &lo, &hi);
      for (int t = 0; t < kT; ++t) {
        dl[t] = _mm512_dpbusd_epi32(dl[t], lo, bcast4(a[t].q + 64 * c + 4 * j));
        dh[t] = _mm512_dpbusd_epi32(dh[t], hi, bcast4(a[t].q + 64 * c + 32 + 4 * j));
      }
    }
    for (int t = 0; t < kT; ++t) {
      isum[t] =
          _mm512_add_epi32(isum[t], _mm512_add_epi32(_mm512_mullo_epi32(dl[t], s.sc[2 * c]),
                                                     _mm512_mullo_epi32(dh[t], s.sc[2 * c + 1])));
    }
  }
  for (int t = 0; t < kT; ++t) {
    __m512i msum = _mm512_setzero_si512();
    for (int p = 0; p < 4; ++p) {  // activation sums over 32 elements, as int16 pairs
      const int16_t* bs = a[t].bsums + 4 * p;
      const uint32_t pair = static_cast<uint16_t>(bs[0] + bs[1]) |
                            static_cast<uint32_t>(static_cast<uint16_t>(bs[2] + bs[3])) << 16;
      msum = _mm512_dpwssd_epi32(msum, s.mpair[p], _mm512_set1_epi32(static_cast<int32_t>(pair)));
    }
    const __m512 da = _mm512_set1_ps(a[t].d);
    const __m512 v =
        _mm512_sub_ps(_mm512_mul_ps(_mm512_mul_ps(s.d, da), _mm512_cvtepi32_ps(isum[t])),
                      _mm512_mul_ps(_mm512_mul_ps(s.dmin, da), _mm512_cvtepi32_ps(msum)));
    sum[t] = _mm512_add_ps(sum[t], v);
  }
}

// Q6_K: sum[t] += the super-block at `blk` for kT tokens.
template <int kT>
inline void super_block_q6(const std::byte* blk, const TokenBlock* a, __m512* sum) {
  __m512i isum[kT];
  for (int t = 0; t < kT; ++t) isum[t] = _mm512_setzero_si512();
  for (int h = 0; h < 2; ++h) {
    for (int jh = 0; jh < 2; ++jh) {  // quads 4jh..4jh+3: sub-blocks 8h + 2o + jh
      __m512i acc[kT][4];
      for (int t = 0; t < kT; ++t) {
        for (int o = 0; o < 4; ++o) {
          acc[t][o] = _mm512_set1_epi32(-32 * a[t].bsums[8 * h + 2 * o + jh]);
        }
      }
#pragma GCC unroll 4
      for (int j = 4 * jh; j < 4 * jh + 4; ++j) {
        __m512i v[4];
        q6_values(blk, h, j, v);
        for (int t = 0; t < kT; ++t) {
          for (int o = 0; o < 4; ++o) {
            acc[t][o] =
                _mm512_dpbusd_epi32(acc[t][o], v[o], bcast4(a[t].q + 128 * h + 32 * o + 4 * j));
          }
        }
      }
      for (int o = 0; o < 4; ++o) {
        const __m512i sc = q6_scale(blk, 8 * h + 2 * o + jh);
        for (int t = 0; t < kT; ++t) {
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(acc[t][o], sc));
        }
      }
    }
  }
  const __m512 d = load_half16(blk + 3328);
  for (int t = 0; t < kT; ++t) {
    const __m512 v =
        _mm512_mul_ps(_mm512_mul_ps(d, _mm512_set1_ps(a[t].d)), _mm512_cvtepi32_ps(isum[t]));
    sum[t] = _mm512_add_ps(sum[t], v);
  }
}

// One group (16 rows at `g`) × kT tokens from t0.
template <int kType, int kT>
void group_tile(const MatmulTask& task, const std::byte* g, int64_t t0, float* y, __mmask16 mask) {
  constexpr int64_t kBytes = kType == 4   ? kGroupedQ4_KBytes
                             : kType == 5 ? kGroupedQ5_KBytes
                                          : kGroupedQ6_KBytes;
  const int64_t nb = task.w.cols / kQKK;
  __m512 sum[kT];
  for (int t = 0; t < kT; ++t) sum[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    prefetch_bytes(g + b * kBytes + kPrefetchAhead, kBytes);
    TokenBlock a[kT];
    for (int t = 0; t < kT; ++t) a[t] = token_block(task, t0 + t, b);
    if constexpr (kType == 6) {
      super_block_q6<kT>(g + b * kBytes, a, sum);
    } else {
      super_block_k45<kType == 5, kT>(g + b * kBytes, a, sum);
    }
  }
  for (int t = 0; t < kT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * task.w.rows, mask, sum[t]);
}

template <int kType>
void grouped(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  KEEL_DCHECK(row_begin % kGroupRows == 0);
  const int64_t group_bytes = kGroupRows * static_cast<int64_t>(task.w.row_bytes);
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kGroupRows) {
    const int64_t valid = row_end - r0 < kGroupRows ? row_end - r0 : kGroupRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
    const std::byte* g = task.w.data + r0 / kGroupRows * group_bytes;
    float* y = task.y + r0;
    int64_t t = 0;
    for (; t + 4 <= task.n_tokens; t += 4) group_tile<kType, 4>(task, g, t, y, mask);
    switch (task.n_tokens - t) {
      case 3:
        group_tile<kType, 3>(task, g, t, y, mask);
        break;
      case 2:
        group_tile<kType, 2>(task, g, t, y, mask);
        break;
      case 1:
        group_tile<kType, 1>(task, g, t, y, mask);
        break;
      default:
        break;
    }
  }
}

// The row-major tail, then the GEMM (many tokens) or the decode kernel.
template <int kType>
void dispatch(const MatmulTask& task, int64_t row_begin, int64_t row_end, MatmulFn row_major,
              MatmulFn gemm) {
  const int64_t full = grouped_rows(task.w.rows);
  if (row_end > full) {
    row_major(task, row_begin > full ? row_begin : full, row_end);
    row_end = full;
  }
  if (row_begin >= row_end) return;
  if (task.n_tokens >= kKQuantGemmMinTokens) return gemm(task, row_begin, row_end);
  grouped<kType>(task, row_begin, row_end);
}

}  // namespace

void grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<4>(task, row_begin, row_end, matmul_q4_k, gemm_grouped_q4_k);
}
void grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<5>(task, row_begin, row_end, matmul_q5_k, gemm_grouped_q5_k);
}
void grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  dispatch<6>(task, row_begin, row_end, matmul_q6_k, gemm_grouped_q6_k);
}

}  // namespace keel::kernels::avx512
