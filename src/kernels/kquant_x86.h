// The x86 K-quant matmul (Q4_K, Q5_K, Q6_K weights × Q8_K activations), written once with
// 256-bit integer ops and included by avx2_kquant.cpp and avx512_kquant.cpp, which set
// KEEL_KQUANT_VNNI (0: `pmaddwd` + add; 1: AVX512-VNNI `vpdpwssd`). Everything here has internal
// linkage so the two builds (different target flags) never share a symbol.
//
// Per row and group of up to kMaxTokens tokens, per 256-element super-block: the weights are
// unpacked into 8 vectors of 32 unsigned quants in element order (Q4_K: nibbles; Q5_K: + bit 4
// from qh; Q6_K: 6-bit, value q − 32) with one int16 scale vector each; `maddubs` forms
// q·a pair sums (no saturation: q ≤ 63, |a| ≤ 127) and `madd` with the scales accumulates exact
// int32 sums. The Q4_K/Q5_K mins and the Q6_K −32 offset come from the activation block sums.
// Each super-block ends with exact integer totals, scaled in f32 as the scalar reference does.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/blocks.h"
#include "kernels/dispatch.h"

#ifndef KEEL_KQUANT_VNNI
#error "define KEEL_KQUANT_VNNI before including kquant_x86.h"
#endif

namespace keel::kernels {
namespace {

constexpr int kMaxTokens = 4;

// acc + Σ pairs of (p16 · s), int16 → int32.
inline __m256i madd_acc(__m256i acc, __m256i p16, __m256i s) {
#if KEEL_KQUANT_VNNI
  return _mm256_dpwssd_epi32(acc, p16, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, s));
#endif
}

inline float half_to_float(const std::byte* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// One super-block of one row, unpacked: quants q[j] for elements 32j..32j+31, their int16
// scales s[j], the super-block scale d, and (Q4_K/Q5_K) dmin with the mins as an int16 vector
// [m0 m0 m1 m1 … m7 m7] matching the 16 activation bsums.
struct Unpacked {
  __m256i q[8];
  __m256i s[8];
  __m256i mins;
  float d;
  float dmin;
};

// Q4_K (kQ5 = false) or Q5_K.
template <bool kQ5>
inline void unpack_k4_k5(const std::byte* blk, Unpacked& u) {
  u.d = half_to_float(blk);
  u.dmin = half_to_float(blk + 2);
  uint32_t w[3];
  std::memcpy(w, blk + 4, 12);
  // Bytes: sc0..3, sc4..7, m0..3, m4..7 (6-bit values; see unpack_k_scales()).
  const uint32_t packed[4] = {
      w[0] & 0x3f3f3f3fu,
      (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4,
      w[1] & 0x3f3f3f3fu,
      ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4,
  };
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed));
  // Scale j broadcast to all 16 int16 lanes: one byte shuffle each from the 8 scales as int16.
  const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(bytes));
  for (int j = 0; j < 8; ++j) {
    u.s[j] = _mm256_shuffle_epi8(sc16,
                                 _mm256_set1_epi16(static_cast<int16_t>(2 * j | (2 * j + 1) << 8)));
  }
  const __m128i m16 = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(bytes, bytes));
  u.mins = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(m16, m16)),
                                   _mm_unpackhi_epi16(m16, m16), 1);
  const std::byte* qs = blk + (kQ5 ? 48 : 16);
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  __m256i qh = _mm256_setzero_si256();
  if (kQ5) qh = load256(blk + 16);
  const __m256i bit0 = _mm256_set1_epi8(1);
  for (int c = 0; c < 4; ++c) {
    const __m256i x = load256(qs + 32 * c);
    __m256i lo = _mm256_and_si256(x, low4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), low4);
    if (kQ5) {  // bit 2c of qh[l] → +16 for element 64c+l, bit 2c+1 → +16 for 64c+32+l
      const __m256i hl = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c)), bit0);
      const __m256i hh = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(2 * c + 1)), bit0);
      lo = _mm256_or_si256(lo, _mm256_slli_epi16(hl, 4));
      hi = _mm256_or_si256(hi, _mm256_slli_epi16(hh, 4));
    }
    u.q[2 * c] = lo;
    u.q[2 * c + 1] = hi;
  }
}

inline void unpack_q6_k(const std::byte* blk, Unpacked& u) {
  u.d = half_to_float(blk + 208);
  u.dmin = 0.0f;
  // 16 int16 scales; vector j needs [s_2j ×8 | s_2j+1 ×8] (16 elements per sub-block).
  const __m256i sc16 =
      _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 192)));
  u.mins = sc16;  // used for the −32 offset: Σ s_i · bsum_i
  const __m256i lo_b = _mm256_permute2x128_si256(sc16, sc16, 0x00);
  const __m256i hi_b = _mm256_permute2x128_si256(sc16, sc16, 0x11);
  for (int j = 0; j < 8; ++j) {
    const int w0 = (2 * j) % 8, w1 = (2 * j + 1) % 8;  // word index inside the 128-bit lane
    const char a0 = static_cast<char>(2 * w0), a1 = static_cast<char>(2 * w0 + 1);
    const char b0 = static_cast<char>(2 * w1), b1 = static_cast<char>(2 * w1 + 1);
    const __m256i idx =
        _mm256_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, b0, b1, b0,
                         b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1);
    u.s[j] = _mm256_shuffle_epi8(j < 4 ? lo_b : hi_b, idx);
  }
  const __m256i low4 = _mm256_set1_epi8(0x0f);
  for (int h = 0; h < 2; ++h) {
    const __m256i ql0 = load256(blk + 64 * h);
    const __m256i ql1 = load256(blk + 64 * h + 32);
    const __m256i qh = load256(blk + 128 + 32 * h);
    u.q[4 * h + 0] =
        _mm256_or_si256(_mm256_and_si256(ql0, low4),
                        _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
    u.q[4 * h + 1] =
        _mm256_or_si256(_mm256_and_si256(ql1, low4),
                        _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0c)), 2));
    u.q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), low4),
                                     _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
    u.q[4 * h + 3] = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low4),
        _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xc0))), 2));
  }
}

// The sums of the 8 int32 lanes of a and of b.
inline void hsum2_epi32(__m256i a, __m256i b, int32_t* sa, int32_t* sb) {
  const __m256i h = _mm256_hadd_epi32(a, b);  // [a01 a23 b01 b23 | a45 a67 b45 b67]
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
  s = _mm_hadd_epi32(s, s);  // [a b a b]
  *sa = _mm_cvtsi128_si32(s);
  *sb = _mm_extract_epi32(s, 1);
}

// kType: 4, 5 or 6. One row × kT tokens starting at t0. Per super-block the exact integer
// totals (sub-block dots times scales; the mins' or the −32 offset's activation-sum term) are
// scaled and summed in f32 exactly as scalar_kquant.cpp does, so every x86 table, the scalar
// reference and the AVX-512 GEMM (avx512_kquant_gemm.cpp) give bit-identical results.
template <int kType, int kT>
void row_tokens(const MatmulTask& task, const std::byte* row, int64_t r, int64_t t0) {
  constexpr int64_t kBytes = kType == 4 ? kQ4_KBytes : kType == 5 ? kQ5_KBytes : kQ6_KBytes;
  const int64_t cols = task.w.cols, nb = cols / kQKK;
  float sum[kT] = {};
  Unpacked u;
  for (int64_t b = 0; b < nb; ++b) {
    const std::byte* blk = row + b * kBytes;
    if constexpr (kType == 6) {
      unpack_q6_k(blk, u);
    } else {
      unpack_k4_k5<kType == 5>(blk, u);
    }
    for (int t = 0; t < kT; ++t) {
      const int64_t tb = (t0 + t) * nb + b;
      const int8_t* a = task.q8k.qs + tb * kQKK;
      const __m256i bsums = load256(task.q8k.bsums + tb * 16);
      __m256i isum = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j) {
        isum = madd_acc(isum, _mm256_maddubs_epi16(u.q[j], load256(a + 32 * j)), u.s[j]);
      }
      // Q4_K/Q5_K: Σ m_j·bsum_j (the mins); Q6_K: Σ s_i·bsum_i (the −32 offset).
      int32_t sumi, summ;
      hsum2_epi32(isum, _mm256_madd_epi16(u.mins, bsums), &sumi, &summ);
      const float da = task.q8k.d[tb];
      if constexpr (kType == 6) {
        sum[t] += u.d * da * static_cast<float>(sumi - 32 * summ);
      } else {
        sum[t] += u.d * da * static_cast<float>(sumi) - u.dmin * da * static_cast<float>(summ);
      }
    }
  }
  for (int t = 0; t < kT; ++t) task.y[(t0 + t) * task.w.rows + r] = sum[t];
}

template <int kType>
void matmul_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* row = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    int64_t t = 0;
    for (; t + kMaxTokens <= task.n_tokens; t += kMaxTokens) {
      row_tokens<kType, kMaxTokens>(task, row, r, t);
    }
    switch (task.n_tokens - t) {
      case 3:
        row_tokens<kType, 3>(task, row, r, t);
        break;
      case 2:
        row_tokens<kType, 2>(task, row, r, t);
        break;
      case 1:
        row_tokens<kType, 1>(task, row, r, t);
        break;
      default:
        break;
    }
  }
}

}  // namespace
}  // namespace keel::kernels
