// Scalar dequantization of one row, bit-exact with ggml's dequantize_row_* (the reference that
// SIMD kernels and repacked layouts are tested against). The order of float operations follows
// ggml's (e.g. Q4_K computes (d·sc)·q − dmin·m) because it decides the last bit; the module is
// compiled with -ffp-contract=off so no multiply-add is fused.
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/blocks.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

void dequantize_q8_0(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ8_0Bytes) {
    const float d = fp16_to_fp32(load_u16(src));
    const int8_t* qs = as_i8(src + 2);
    for (int j = 0; j < 32; ++j) dst[b * 32 + j] = static_cast<float>(qs[j]) * d;
  }
}

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, src += kQ4_0Bytes) {
    const float d = fp16_to_fp32(load_u16(src));
    const uint8_t* qs = as_u8(src + 2);
    for (int j = 0; j < 16; ++j) {
      dst[b * 32 + j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      dst[b * 32 + j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

// Q4_K and Q5_K share the scale layout; qh == nullptr means Q4_K (no fifth bit).
void dequantize_k4_k5(const std::byte* blk, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = fp16_to_fp32(load_u16(blk));
  const float dmin = fp16_to_fp32(load_u16(blk + 2));
  uint8_t sc[8], m[8];
  unpack_k_scales(as_u8(blk + 4), sc, m);
  for (int c = 0; c < 4; ++c) {  // 4 chunks of 64: low nibbles then high nibbles of qs[32c..]
    const float d1 = d * static_cast<float>(sc[2 * c]);
    const float m1 = dmin * static_cast<float>(m[2 * c]);
    const float d2 = d * static_cast<float>(sc[2 * c + 1]);
    const float m2 = dmin * static_cast<float>(m[2 * c + 1]);
    const uint8_t* q = qs + 32 * c;
    for (int l = 0; l < 32; ++l) {
      int v = q[l] & 0x0f;
      if (qh != nullptr && (qh[l] >> (2 * c) & 1)) v += 16;
      y[64 * c + l] = d1 * static_cast<float>(v) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      int v = q[l] >> 4;
      if (qh != nullptr && (qh[l] >> (2 * c + 1) & 1)) v += 16;
      y[64 * c + 32 + l] = d2 * static_cast<float>(v) - m2;
    }
  }
}

void dequantize_q6_k_block(const std::byte* blk, float* y) {
  const uint8_t* ql = as_u8(blk);
  const uint8_t* qh = as_u8(blk + 128);
  const int8_t* sc = as_i8(blk + 192);
  const float d = fp16_to_fp32(load_u16(blk + 208));
  for (int h = 0; h < 2; ++h, ql += 64, qh += 32, sc += 8, y += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | ((qh[l] >> 0 & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | ((qh[l] >> 2 & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
  }
}

}  // namespace

void dequantize_row(DType dtype, const std::byte* src, float* dst, int64_t n) {
  KEEL_CHECK(n >= 0 && n % dtype_info(dtype).block_size == 0);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_u16(src + 2 * i));
      return;
    case DType::kQ8_0:
      dequantize_q8_0(src, dst, n);
      return;
    case DType::kQ4_0:
      dequantize_q4_0(src, dst, n);
      return;
    case DType::kQ4_K:
      for (int64_t b = 0; b < n / kQKK; ++b, src += kQ4_KBytes)
        dequantize_k4_k5(src, nullptr, as_u8(src + 16), dst + b * kQKK);
      return;
    case DType::kQ5_K:
      for (int64_t b = 0; b < n / kQKK; ++b, src += kQ5_KBytes)
        dequantize_k4_k5(src, as_u8(src + 16), as_u8(src + 48), dst + b * kQKK);
      return;
    case DType::kQ6_K:
      for (int64_t b = 0; b < n / kQKK; ++b, src += kQ6_KBytes)
        dequantize_q6_k_block(src, dst + b * kQKK);
      return;
    default:
      break;
  }
  KEEL_CHECK_MSG(false, "dequantize_row: unsupported dtype");
}

bool matmul_supports(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16:
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace keel::kernels
