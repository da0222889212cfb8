// AVX2 twins of the scalar element-wise kernels: RMSNorm (squares summed in double, as the scalar
// reference does), SiLU·mul (a polynomial exp within ~2 ulp of std::exp), add, and f16 / bf16
// rounding. Tails run scalar code.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/avx2_math.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx2 {

void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    const __m256d lo = _mm256_cvtps_pd(_mm_loadu_ps(x + i));
    const __m256d hi = _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4));
    acc0 = _mm256_fmadd_pd(lo, lo, acc0);  // exact squares: f32·f32 fits in a double
    acc1 = _mm256_fmadd_pd(hi, hi, acc1);
  }
  const __m256d acc = _mm256_add_pd(acc0, acc1);
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  double ss = _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  for (int64_t j = i; j < dim; ++j) ss += static_cast<double>(x[j]) * x[j];
  const float scale =
      1.0f / __builtin_sqrtf(static_cast<float>(ss / static_cast<double>(dim)) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= dim; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), vs);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
  }
  for (; i < dim; ++i) out[i] = x[i] * scale * weight[i];
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(
        out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + exp_scalar(-gate[i])) * up[i];
}

void add(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  }
  for (; i < n; ++i) y[i] += x[i];
}

// F16C conversion rounds to nearest-even like fp32_to_fp16 (NaN payloads may differ).
void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i), h);
    _mm256_storeu_ps(rounded + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) {
    bits[i] = static_cast<uint16_t>(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
    rounded[i] = _cvtsh_ss(bits[i]);
  }
}

// (u + 0x7fff + ((u >> 16) & 1)) >> 16, NaNs made quiet: fp32_to_bf16 in integer lanes.
void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  int64_t i = 0;
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  for (; i + 8 <= n; i += 8) {
    const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    r = _mm256_blendv_epi8(r, quiet, nan);
    // 8 × 32-bit lanes holding 16-bit values → 8 packed uint16 (no saturation: all < 65536).
    const __m128i packed =
        _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(bits + i), packed);
    _mm256_storeu_ps(rounded + i, _mm256_castsi256_ps(_mm256_slli_epi32(r, 16)));
  }
  for (; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    const uint16_t b = (u & 0x7fffffffu) > 0x7f800000u
                           ? static_cast<uint16_t>((u >> 16) | 64u)
                           : static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
    bits[i] = b;
    const uint32_t w = static_cast<uint32_t>(b) << 16;
    std::memcpy(rounded + i, &w, 4);
  }
}

}  // namespace keel::kernels::avx2
