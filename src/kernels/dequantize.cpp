// Scalar dequantization of one row, bit-exact with ggml's dequantize_row_* (the reference that
// SIMD kernels and repacked layouts are tested against).
#include <cstring>

#include "core/check.h"
#include "core/fp16.h"
#include "kernels/kernels.h"

namespace keel::kernels {
namespace {

uint16_t load_u16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

void dequantize_q8_0(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 34) {
    const float d = fp16_to_fp32(load_u16(src));
    const auto* qs = reinterpret_cast<const int8_t*>(src + 2);
    for (int j = 0; j < 32; ++j) dst[b * 32 + j] = static_cast<float>(qs[j]) * d;
  }
}

void dequantize_q4_0(const std::byte* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / 32; ++b, src += 18) {
    const float d = fp16_to_fp32(load_u16(src));
    const auto* qs = reinterpret_cast<const uint8_t*>(src + 2);
    for (int j = 0; j < 16; ++j) {
      dst[b * 32 + j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
      dst[b * 32 + j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
    }
  }
}

}  // namespace

void dequantize_row(DType dtype, const std::byte* src, float* dst, int64_t n) {
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
      return true;
    default:
      return false;
  }
}

}  // namespace keel::kernels
