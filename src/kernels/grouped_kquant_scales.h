// The Q4_K / Q5_K scales of a row-group super-block (weight_layout.h), unpacked with 128-bit
// integer ops: byte k of the 16 rows' packed 12-byte scales is one 16-byte vector at
// 64 + 16k, and the result is, per sub-block s, the 16 rows' 6-bit scale sc[s] and min m[s] as
// bytes. Included by the AVX2 and AVX-512 grouped kernels (each compiles it with its own flags;
// internal linkage, so no symbol is shared between them).
#pragma once

#include <immintrin.h>

#include <cstddef>

namespace keel::kernels {
namespace {

inline void unpack_k45_scale_bytes(const std::byte* blk, __m128i* sc, __m128i* m) {
  __m128i s[12];
  for (int k = 0; k < 12; ++k) {
    s[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 64 + 16 * k));
  }
  const __m128i m6 = _mm_set1_epi8(63), m4 = _mm_set1_epi8(0x0f), m2 = _mm_set1_epi8(0x03);
  for (int j = 0; j < 4; ++j) {  // the bit layout of unpack_k_scales() in blocks.h
    sc[j] = _mm_and_si128(s[j], m6);
    m[j] = _mm_and_si128(s[j + 4], m6);
    const __m128i sc_hi = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(s[j], 6), m2), 4);
    const __m128i m_hi = _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(s[j + 4], 6), m2), 4);
    sc[j + 4] = _mm_or_si128(_mm_and_si128(s[j + 8], m4), sc_hi);
    m[j + 4] = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(s[j + 8], 4), m4), m_hi);
  }
}

}  // namespace
}  // namespace keel::kernels
