// Scalar reference kernels for the element-wise ops: the Q8_0 activation quantizer, f16/bf16
// rounding of activations, RMSNorm, SiLU·mul and add.
//
// Pure functions; thread-safe.
#include <cmath>

#include "core/fp16.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::scalar {

// ggml's quantize_row_q8_0_ref per 32 values: d = amax/127, q = roundf(x·(1/d)); d is kept
// fp16-rounded (what the dot product multiplies by), plus Σq per block.
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK, qs += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(x[j]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[b] = fp16_to_fp32(fp32_to_fp16(db));
    int32_t s = 0;
    for (int j = 0; j < kQK; ++j) {
      qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      s += qs[j];
    }
    sum[b] = s;
  }
}

void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  for (int64_t i = 0; i < n; ++i) {
    bits[i] = fp32_to_fp16(x[i]);
    rounded[i] = fp16_to_fp32(bits[i]);
  }
}

void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  for (int64_t i = 0; i < n; ++i) {
    bits[i] = fp32_to_bf16(x[i]);
    rounded[i] = bf16_to_fp32(bits[i]);
  }
}

void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / static_cast<double>(dim)) + eps);
  for (int64_t i = 0; i < dim; ++i) out[i] = x[i] * scale * weight[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void add(const float* x, int64_t n, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace keel::kernels::scalar
