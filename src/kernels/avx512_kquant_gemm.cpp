// Prefill GEMM for Q4_K, Q5_K and Q6_K weights against Q8_K activations (AVX-512 + VNNI), used by
// the AVX-512 K-quant matmul when a call has at least kKQuantGemmMinTokens tokens.
//
// Blocks of 4 tiles of 16 rows are unpacked once per call (kquant_x86.h's unpackers) into a
// column-interleaved buffer: for each super-block, 64 vectors of 4 unsigned quants × 16 rows,
// the 16 rows' integer scales per scale group (Q4_K/Q5_K: 8 groups of 32 elements; Q6_K: 16 of
// 16), the Q4_K/Q5_K mins as int16 pairs and the f32 d / dmin. Groups of 12 tokens are packed
// likewise (quants per super-block, Q6_K's −32·bsum per group, bsum pairs per 32 elements).
// The micro-kernel keeps one group's weight vectors in registers; per token it runs `vpdpbusd`
// with 4 broadcast activation bytes (int32 lanes = the 16 rows' group dots, no horizontal
// reduction), multiplies by the group scales (`vpmulld`) and adds into an exact int32 total per
// row; the mins come from 4 `vpdpwssd` against the activation sums.
//
// Weights in the row-group layout (weight_layout.h) are packed from their quad vectors directly
// (gemm_grouped_*), with the same packed form.
//
// Numerics: the exact integer totals per super-block are scaled and summed in f32 in the same
// order as scalar_kquant.cpp and the row kernels, so results are bit-identical to both.
// The helpers are always inlined so the GEMM loops make no calls (see avx512_q8_gemm.cpp: GCC 12
// kept a value in an AVX-512 mask register across a call). Pure functions; thread-safe (buffers
// are per call).
#define KEEL_KQUANT_VNNI 1
#include "kernels/kquant_x86.h"
// (kquant_x86.h first: it needs KEEL_KQUANT_VNNI)
#include "kernels/avx512_grouped_kquant.h"

#include <algorithm>
#include <vector>

#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {
namespace {

constexpr int kRows = 16;
constexpr int kTokens = 12;
constexpr int kTilesPerBlock = 4;
constexpr int kQuads = kQKK / 4;  // 4-element quads per super-block

// One super-block of a 16-row tile.
struct alignas(64) PackedSuperBlock {
  uint32_t q[kQuads][kRows];  // 4 unsigned quants of each row
  int32_t scale[16][kRows];   // per scale group (Q4_K/Q5_K use the first 8)
  uint32_t mins[4][kRows];    // Q4_K/Q5_K: int16 pairs (m_2p, m_2p+1)
  float d[kRows];
  float dmin[kRows];
};

// One super-block of a token tile.
struct alignas(64) PackedTokenBlock {
  int8_t q[kTokens][kQKK];
  int32_t corr[kTokens][16];        // Q6_K: −32 · bsum of each 16-element group
  uint32_t bsum_pairs[kTokens][4];  // Q4_K/Q5_K: int16 pairs (bs_2p, bs_2p+1), bs_j over 32
  float d[kTokens];
};

template <int kType>
[[gnu::always_inline]] inline void pack_row(const std::byte* blk, int r, PackedSuperBlock* p) {
  Unpacked u;
  if constexpr (kType == 6) {
    unpack_q6_k(blk, u);
  } else {
    unpack_k4_k5<kType == 5>(blk, u);
  }
  for (int j = 0; j < 8; ++j) {
    uint32_t quads[8];
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(quads), u.q[j]);
    for (int i = 0; i < 8; ++i) p->q[8 * j + i][r] = quads[i];
  }
  int16_t m16[16];
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(m16), u.mins);
  if constexpr (kType == 6) {
    for (int g = 0; g < 16; ++g) p->scale[g][r] = m16[g];  // u.mins holds the 16 scales
  } else {
    for (int g = 0; g < 8; ++g) p->scale[g][r] = _mm256_extract_epi16(u.s[g], 0);
    // u.mins = [m0 m0 m1 m1 … m7 m7]
    for (int pr = 0; pr < 4; ++pr) {
      p->mins[pr][r] = static_cast<uint16_t>(m16[4 * pr]) |
                       static_cast<uint32_t>(static_cast<uint16_t>(m16[4 * pr + 2])) << 16;
    }
  }
  p->d[r] = u.d;
  p->dmin[r] = u.dmin;
}

// One super-block of a 16-row group (avx512_grouped_kquant.h) into the same packed form.
template <int kType>
[[gnu::always_inline]] inline void pack_group(const std::byte* blk, PackedSuperBlock* p) {
  if constexpr (kType == 6) {
    for (int h = 0; h < 2; ++h) {
      for (int j = 0; j < 8; ++j) {
        __m512i v[4];
        q6_values(blk, h, j, v);
        for (int o = 0; o < 4; ++o) _mm512_store_si512(p->q[32 * h + 8 * o + j], v[o]);
      }
    }
    for (int g = 0; g < 16; ++g) _mm512_store_si512(p->scale[g], q6_scale(blk, g));
    _mm512_store_ps(p->d, load_half16(blk + 3328));
    _mm512_store_ps(p->dmin, _mm512_setzero_ps());
  } else {
    for (int q = 0; q < 32; ++q) {
      __m512i lo, hi;
      k45_values<kType == 5>(blk, q, &lo, &hi);
      _mm512_store_si512(p->q[16 * (q / 8) + q % 8], lo);
      _mm512_store_si512(p->q[16 * (q / 8) + 8 + q % 8], hi);
    }
    GroupScalesK45 sc;
    load_scales_k45(blk, &sc);
    for (int g = 0; g < 8; ++g) _mm512_store_si512(p->scale[g], sc.sc[g]);
    for (int pr = 0; pr < 4; ++pr) _mm512_store_si512(p->mins[pr], sc.mpair[pr]);
    _mm512_store_ps(p->d, sc.d);
    _mm512_store_ps(p->dmin, sc.dmin);
  }
}

template <int kType>
[[gnu::always_inline]] inline void pack_tokens(const MatmulTask& task, int64_t t0,
                                               std::vector<PackedTokenBlock>* out) {
  const int64_t cols = task.w.cols, nb = cols / kQKK;
  const int64_t n_valid = std::min<int64_t>(kTokens, task.n_tokens - t0);
  for (int t = 0; t < kTokens; ++t) {
    const int64_t tok = t0 + std::min<int64_t>(t, n_valid - 1);  // tail: repeat the last token
    for (int64_t b = 0; b < nb; ++b) {
      PackedTokenBlock& p = (*out)[static_cast<size_t>(b)];
      const int64_t tb = tok * nb + b;
      std::memcpy(p.q[t], task.q8k.qs + tb * kQKK, kQKK);
      const int16_t* bs = task.q8k.bsums + tb * 16;
      for (int g = 0; g < 16; ++g) p.corr[t][g] = -32 * bs[g];
      for (int pr = 0; pr < 4; ++pr) {
        const int32_t lo = bs[4 * pr] + bs[4 * pr + 1], hi = bs[4 * pr + 2] + bs[4 * pr + 3];
        p.bsum_pairs[t][pr] = static_cast<uint16_t>(lo) | static_cast<uint32_t>(hi) << 16;
      }
      p.d[t] = task.q8k.d[tb];
    }
  }
}

// isum[t] += Σ over the super-block's scale groups of scale_g · (group dot + corr).
template <int kType>
[[gnu::always_inline]] inline void super_block_dots(const PackedSuperBlock& w,
                                                    const PackedTokenBlock& a, __m512i* isum) {
  constexpr int kGroups = kType == 6 ? 16 : 8;
  constexpr int kGroupQuads = kQuads / kGroups;  // 4 or 8
  for (int g = 0; g < kGroups; ++g) {
    __m512i wq[kGroupQuads];
#pragma GCC unroll 8
    for (int i = 0; i < kGroupQuads; ++i) wq[i] = _mm512_load_si512(w.q[g * kGroupQuads + i]);
    const __m512i sc = _mm512_load_si512(w.scale[g]);
#pragma GCC unroll 16
    for (int t = 0; t < kTokens; ++t) {
      __m512i dot = kType == 6 ? _mm512_set1_epi32(a.corr[t][g]) : _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < kGroupQuads; ++i) {
        int32_t quad;
        std::memcpy(&quad, a.q[t] + 4 * (g * kGroupQuads + i), 4);
        dot = _mm512_dpbusd_epi32(dot, wq[i], _mm512_set1_epi32(quad));
      }
      isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(dot, sc));
    }
  }
}

// sum[t] (16 rows of token t) += the token tile's contribution over every super-block.
template <int kType>
[[gnu::always_inline]] inline void run_tile(const PackedSuperBlock* w, const PackedTokenBlock* a,
                                            int64_t nb, __m512* sum) {
  for (int64_t b = 0; b < nb; ++b) {
    __m512i isum[kTokens];
    for (int t = 0; t < kTokens; ++t) isum[t] = _mm512_setzero_si512();
    super_block_dots<kType>(w[b], a[b], isum);
    const __m512 d = _mm512_load_ps(w[b].d);
    for (int t = 0; t < kTokens; ++t) {
      const __m512 da = _mm512_set1_ps(a[b].d[t]);
      __m512 v = _mm512_mul_ps(_mm512_mul_ps(d, da), _mm512_cvtepi32_ps(isum[t]));
      if constexpr (kType != 6) {
        __m512i msum = _mm512_setzero_si512();
        for (int pr = 0; pr < 4; ++pr) {
          msum =
              _mm512_dpwssd_epi32(msum, _mm512_load_si512(w[b].mins[pr]),
                                  _mm512_set1_epi32(static_cast<int32_t>(a[b].bsum_pairs[t][pr])));
        }
        const __m512 m =
            _mm512_mul_ps(_mm512_mul_ps(_mm512_load_ps(w[b].dmin), da), _mm512_cvtepi32_ps(msum));
        v = _mm512_sub_ps(v, m);
      }
      sum[t] = _mm512_add_ps(sum[t], v);
    }
  }
}

// kGrouped: the weights are whole row groups (weight_layout.h), as the callers guarantee.
template <int kType, bool kGrouped>
void gemm(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  constexpr int64_t kBytes = kType == 4 ? kQ4_KBytes : kType == 5 ? kQ5_KBytes : kQ6_KBytes;
  const int64_t nb = task.w.cols / kQKK, y_stride = task.w.rows;
  std::vector<PackedSuperBlock> weights(static_cast<size_t>(kTilesPerBlock * nb));
  std::vector<PackedTokenBlock> tokens(static_cast<size_t>(nb));
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kRows * kTilesPerBlock) {
    int n_tiles = 0;
    for (int64_t tr = r0; tr < row_end && n_tiles < kTilesPerBlock; tr += kRows, ++n_tiles) {
      const int64_t valid = std::min<int64_t>(row_end - tr, kRows);
      if constexpr (kGrouped) {
        const std::byte* group = task.w.data + static_cast<size_t>(tr) * task.w.row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
          pack_group<kType>(group + b * kRows * kBytes,
                            &weights[static_cast<size_t>(n_tiles * nb + b)]);
        }
        continue;
      }
      for (int r = 0; r < kRows; ++r) {
        const std::byte* row =
            task.w.data +
            static_cast<size_t>(tr + std::min<int64_t>(r, valid - 1)) * task.w.row_bytes;
        for (int64_t b = 0; b < nb; ++b) {
          pack_row<kType>(row + b * kBytes, r, &weights[static_cast<size_t>(n_tiles * nb + b)]);
        }
      }
    }
    for (int64_t t0 = 0; t0 < task.n_tokens; t0 += kTokens) {
      const int64_t n_valid = std::min<int64_t>(kTokens, task.n_tokens - t0);
      pack_tokens<kType>(task, t0, &tokens);
      for (int i = 0; i < n_tiles; ++i) {
        const int64_t tr = r0 + i * kRows;
        const int64_t valid = std::min<int64_t>(row_end - tr, kRows);
        const __mmask16 mask = static_cast<__mmask16>((1u << valid) - 1);
        __m512 sum[kTokens];
        for (int t = 0; t < kTokens; ++t) sum[t] = _mm512_setzero_ps();
        run_tile<kType>(&weights[static_cast<size_t>(i * nb)], tokens.data(), nb, sum);
        for (int t = 0; t < n_valid; ++t) {
          _mm512_mask_storeu_ps(task.y + (t0 + t) * y_stride + tr, mask, sum[t]);
        }
      }
    }
  }
}

}  // namespace

void gemm_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<4, false>(task, row_begin, row_end);
}
void gemm_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<5, false>(task, row_begin, row_end);
}
void gemm_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<6, false>(task, row_begin, row_end);
}
void gemm_grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<4, true>(task, row_begin, row_end);
}
void gemm_grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<5, true>(task, row_begin, row_end);
}
void gemm_grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  gemm<6, true>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx512
