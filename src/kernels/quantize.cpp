// Reference weight quantizers, bit-exact with ggml's quantize_row_*_ref (used to write quantized
// model files, e.g. by `keel make-model`). Scalar and deterministic; compiled without FMA
// contraction so each rounding step is ggml's.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/blocks.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

void store_u16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }

// d = amax / 127 (stored as fp16); q = round(x / d) with the unrounded d.
void quantize_q8_0(const float* x, std::byte* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, dst += kQ8_0Bytes) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    auto* qs = reinterpret_cast<int8_t*>(dst + 2);
    for (int j = 0; j < kQK; ++j) qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

// d = max / -8 where max is the signed value of largest magnitude (first one on ties);
// q = min(15, trunc(x / d + 8.5)); elements j and j+16 share byte j (low, high nibble).
void quantize_q4_0(const float* x, std::byte* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, dst += kQ4_0Bytes) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    store_u16(dst, fp32_to_fp16(d));
    auto* qs = reinterpret_cast<uint8_t*>(dst + 2);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQK / 2] * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      qs[j] = static_cast<uint8_t>(q0 | q1 << 4);
    }
  }
}

// Q4_K by min–max per 32-element sub-block (not ggml's iterative search, so not bit-exact with
// llama-quantize; `make-model` needs valid blocks, not the best ones). Per sub-block: offset
// m = −min(0, min x), scale = (max x + m) / 15; the super-block's d and dmin are the largest
// scale and offset / 63, rounded to fp16; the 6-bit sub-block factors round up (scales, so the
// top value fits in 15) or to nearest (offsets). Elements: q = round((x + dmin·m_s) / (d·sc_s)).
void quantize_q4_k(const float* x, std::byte* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK, dst += kQ4_KBytes) {
    float scale[8], offset[8], max_scale = 0, max_offset = 0;
    for (int s = 0; s < 8; ++s) {
      float lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l)
        lo = std::min(lo, x[32 * s + l]), hi = std::max(hi, x[32 * s + l]);
      offset[s] = -lo;
      scale[s] = (hi - lo) / 15.0f;
      max_scale = std::max(max_scale, scale[s]);
      max_offset = std::max(max_offset, offset[s]);
    }
    const uint16_t d16 = fp32_to_fp16(max_scale / 63.0f);
    const uint16_t dmin16 = fp32_to_fp16(max_offset / 63.0f);
    const float d = fp16_to_fp32(d16), dmin = fp16_to_fp32(dmin16);
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) {
      sc[s] = d > 0 ? static_cast<uint8_t>(std::clamp(std::ceil(scale[s] / d), 0.0f, 63.0f)) : 0;
      m[s] = dmin > 0 ? static_cast<uint8_t>(std::clamp(std::round(offset[s] / dmin), 0.0f, 63.0f))
                      : 0;
    }
    store_u16(dst, d16);
    store_u16(dst + 2, dmin16);
    uint8_t* packed = reinterpret_cast<uint8_t*>(dst + 4);  // inverse of unpack_k_scales
    for (int j = 0; j < 4; ++j) {
      packed[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
      packed[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
      packed[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0f) | (m[j + 4] & 0x0f) << 4);
    }
    uint8_t* qs = reinterpret_cast<uint8_t*>(dst + 16);
    std::memset(qs, 0, 128);
    for (int s = 0; s < 8; ++s) {  // sub-block 2c: low nibbles of qs[32c..]; 2c + 1: high
      const float ds = d * sc[s], dm = dmin * m[s];
      for (int l = 0; l < 32; ++l) {
        const float q = ds > 0 ? std::round((x[32 * s + l] + dm) / ds) : 0.0f;
        const auto v = static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
        qs[32 * (s / 2) + l] |= static_cast<uint8_t>(s % 2 == 0 ? v : v << 4);
      }
    }
  }
}

}  // namespace

bool quantize_supports(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
      return true;
    default:
      return false;
  }
}

void quantize_row(DType dtype, const float* src, std::byte* dst, int64_t n) {
  KEEL_CHECK_MSG(quantize_supports(dtype), "quantize_row: unsupported dtype");
  KEEL_CHECK(n >= 0 && n % dtype_info(dtype).block_size == 0);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_bf16(src[i]));
      return;
    case DType::kQ8_0:
      quantize_q8_0(src, dst, n);
      return;
    case DType::kQ4_0:
      quantize_q4_0(src, dst, n);
      return;
    case DType::kQ4_K:
      quantize_q4_k(src, dst, n);
      return;
    default:
      return;
  }
}

}  // namespace keel::kernels
