// GGUF block layouts (byte offsets and sizes) and the small scalar helpers that read them, shared
// by the scalar reference kernels and the SIMD kernels. See docs in shared/guide/cpu-kernels.md §1.
//
// Every helper here is `static inline` on purpose: the SIMD translation units are compiled with
// wider target flags, and an inline function with external linkage instantiated there could be
// picked by the linker for scalar callers (an illegal instruction on older CPUs). Internal
// linkage keeps each translation unit's copy private.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace keel::kernels {

inline constexpr int64_t kQK = 32;    // elements per Q8_0 / Q4_0 block
inline constexpr int64_t kQKK = 256;  // elements per K-quant super-block

// Q8_0: fp16 d @0, int8 qs[32] @2.
inline constexpr int64_t kQ8_0Bytes = 34;
// Q4_0: fp16 d @0, uint8 qs[16] @2 (low nibbles = elements 0..15, high = 16..31, offset 8).
inline constexpr int64_t kQ4_0Bytes = 18;
// Q4_K: fp16 d @0, fp16 dmin @2, scales[12] @4, qs[128] @16.
inline constexpr int64_t kQ4_KBytes = 144;
// Q5_K: fp16 d @0, fp16 dmin @2, scales[12] @4, qh[32] @16, qs[128] @48.
inline constexpr int64_t kQ5_KBytes = 176;
// Q6_K: ql[128] @0, qh[64] @128, int8 scales[16] @192, fp16 d @208.
inline constexpr int64_t kQ6_KBytes = 210;

static inline uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

static inline const uint8_t* as_u8(const std::byte* p) {
  return reinterpret_cast<const uint8_t*>(p);
}
static inline const int8_t* as_i8(const std::byte* p) { return reinterpret_cast<const int8_t*>(p); }

// Unpacks the 12 packed bytes of a Q4_K / Q5_K super-block into 8 six-bit scales and 8 six-bit
// mins (sub-block s covers elements 32s .. 32s+31).
static inline void unpack_k_scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

}  // namespace keel::kernels
