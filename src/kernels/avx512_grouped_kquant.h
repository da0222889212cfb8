// Reading one super-block of a K-quant row group (weight_layout.h) with AVX-512: the 16 rows'
// scales and mins unpacked into lanes, and the quants of one 64-byte quad vector made into
// unsigned values 0..63 in lanes of 4 bytes per row. Shared by the grouped decode kernels
// (avx512_grouped_kquant.cpp) and the packing of the K-quant GEMM (avx512_kquant_gemm.cpp); both
// are compiled with the AVX-512 flags. Everything has internal linkage.
//
// Offsets inside a group's super-block are 16 × the field's offset in a row's block:
//   Q4_K (2304 B): d @0, dmin @32, scale byte k of the 16 rows @64+16k, qs quads @256
//   Q5_K (2816 B): d @0, dmin @32, scale bytes @64, qh quads @256, qs quads @768
//   Q6_K (3360 B): for h, j the vectors ql quad 16h+j, ql quad 16h+8+j, qh quad 8h+j at
//                  192·(8h+j) + 0, 64, 128; int8 scale s of the 16 rows @3072+16s; d @3328
// Quad vector q of a Q4_K/Q5_K qs field covers chunk c = q / 8 (64 elements): its low nibbles are
// elements 64c + 4(q%8) + 0..3 (sub-block 2c), its high nibbles 32 elements later (sub-block
// 2c+1); Q5_K's qh quad q%8 adds bit 2c (low) or 2c+1 (high) as +16.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/grouped_kquant_scales.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::avx512 {
namespace {

inline constexpr int64_t kGroupedQ4_KBytes = 2304;
inline constexpr int64_t kGroupedQ5_KBytes = 2816;
inline constexpr int64_t kGroupedQ6_KBytes = 3360;

inline __m512i load512(const std::byte* p) { return _mm512_loadu_si512(p); }

// Bytes ahead of the block being computed that the kernels prefetch: the hardware prefetchers
// alone fall behind a stream consumed this fast.
#ifndef KEEL_GROUPED_PREFETCH_AHEAD
#define KEEL_GROUPED_PREFETCH_AHEAD 2048
#endif
inline constexpr int64_t kPrefetchAhead = KEEL_GROUPED_PREFETCH_AHEAD;

// Prefetches [p, p + bytes) into L1, one line at a time.
inline void prefetch_bytes(const std::byte* p, int64_t bytes) {
  if (kPrefetchAhead == 0) return;
  for (int64_t off = 0; off < bytes; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(p) + off, _MM_HINT_T0);
  }
}
inline __m128i load128(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m512 load_half16(const std::byte* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The scales of a Q4_K / Q5_K group super-block: sc[s] = the 16 rows' 6-bit scale of sub-block s
// as int32 lanes; mpair[p] = the rows' mins (m_2p, m_2p+1) as int16 pairs per 32-bit lane (for
// `vpdpwssd` against activation-sum pairs); d and dmin as floats.
struct GroupScalesK45 {
  __m512i sc[8];
  __m512i mpair[4];
  __m512 d;
  __m512 dmin;
};

inline void load_scales_k45(const std::byte* blk, GroupScalesK45* out) {
  __m128i sc[8], m[8];
  unpack_k45_scale_bytes(blk, sc, m);
  for (int j = 0; j < 8; ++j) out->sc[j] = _mm512_cvtepu8_epi32(sc[j]);
  for (int p = 0; p < 4; ++p) {
    const __m256i pairs =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(m[2 * p], m[2 * p + 1])),
                                _mm_unpackhi_epi8(m[2 * p], m[2 * p + 1]), 1);
    out->mpair[p] = _mm512_cvtepu8_epi16(pairs);
  }
  out->d = load_half16(blk);
  out->dmin = load_half16(blk + 32);
}

// Quad vector q (0..31) of a Q4_K / Q5_K group super-block as the values of sub-blocks 2c (lo)
// and 2c+1 (hi), c = q / 8.
template <bool kQ5>
inline void k45_values(const std::byte* blk, int q, __m512i* lo, __m512i* hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0f);
  const __m512i v = load512(blk + (kQ5 ? 768 : 256) + 64 * q);
  *lo = _mm512_and_si512(v, low4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
  if constexpr (kQ5) {
    const int c = q / 8;
    const __m512i qh = load512(blk + 256 + 64 * (q % 8));
    const __m512i sixteen = _mm512_set1_epi8(16);
    const __mmask64 bl = _mm512_test_epi8_mask(qh, _mm512_set1_epi8(static_cast<char>(1 << 2 * c)));
    const __mmask64 bh =
        _mm512_test_epi8_mask(qh, _mm512_set1_epi8(static_cast<char>(1 << (2 * c + 1))));
    *lo = _mm512_mask_add_epi8(*lo, bl, *lo, sixteen);
    *hi = _mm512_mask_add_epi8(*hi, bh, *hi, sixteen);
  }
}

// The 16 rows' Q6_K scales of sub-block s (16 elements) as int32 lanes.
inline __m512i q6_scale(const std::byte* blk, int s) {
  return _mm512_cvtepi8_epi32(load128(blk + 3072 + 16 * s));
}

// The four value vectors of half h (0..1) and quad j (0..7) of a Q6_K group super-block:
// v[o] holds elements 128h + 32o + 4j .. +3 (sub-block 8h + 2o + j/4), values 0..63.
inline void q6_values(const std::byte* blk, int h, int j, __m512i* v) {
  const std::byte* p = blk + 192 * (8 * h + j);
  const __m512i la = load512(p);
  const __m512i lb = load512(p + 64);
  const __m512i qh = load512(p + 128);
  const __m512i low4 = _mm512_set1_epi8(0x0f), bits45 = _mm512_set1_epi8(0x30);
  v[0] = _mm512_or_si512(_mm512_and_si512(la, low4),
                         _mm512_and_si512(_mm512_slli_epi16(qh, 4), bits45));
  v[1] = _mm512_or_si512(_mm512_and_si512(lb, low4),
                         _mm512_and_si512(_mm512_slli_epi16(qh, 2), bits45));
  v[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(la, 4), low4),
                         _mm512_and_si512(qh, bits45));
  v[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(lb, 4), low4),
                         _mm512_and_si512(_mm512_srli_epi16(qh, 2), bits45));
}

}  // namespace
}  // namespace keel::kernels::avx512
