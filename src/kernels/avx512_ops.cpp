// AVX-512 twins of the scalar element-wise kernels: RMSNorm (squares summed in double, as the
// scalar reference does), SiLU·mul (a polynomial exp within ~2 ulp of std::exp), add, and f16 /
// bf16 rounding. Tails use masked loads and stores.
//
// Pure functions; thread-safe.
#include <immintrin.h>

#include <cstdint>

#include "kernels/avx512_math.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {
namespace {

inline __m512 silu_mul_ps(__m512 g, __m512 u) {
  const __m512 e = exp_ps(_mm512_sub_ps(_mm512_setzero_ps(), g));
  return _mm512_mul_ps(_mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), u);
}

}  // namespace

void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out) {
  __m512d acc0 = _mm512_setzero_pd(), acc1 = _mm512_setzero_pd();
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    const __m512d lo = _mm512_cvtps_pd(_mm256_loadu_ps(x + i));
    const __m512d hi = _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8));
    acc0 = _mm512_fmadd_pd(lo, lo, acc0);  // exact squares: f32·f32 fits in a double
    acc1 = _mm512_fmadd_pd(hi, hi, acc1);
  }
  double ss = _mm512_reduce_add_pd(_mm512_add_pd(acc0, acc1));
  for (int64_t j = i; j < dim; ++j) ss += static_cast<double>(x[j]) * x[j];
  const float scale =
      1.0f / __builtin_sqrtf(static_cast<float>(ss / static_cast<double>(dim)) + eps);
  const __m512 vs = _mm512_set1_ps(scale);
  for (i = 0; i + 16 <= dim; i += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + i), vs);
    _mm512_storeu_ps(out + i, _mm512_mul_ps(v, _mm512_loadu_ps(weight + i)));
  }
  if (i < dim) {
    const __mmask16 m = tail_mask(dim - i);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, weight + i)));
  }
}

void silu_mul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(out + i, silu_mul_ps(_mm512_loadu_ps(gate + i), _mm512_loadu_ps(up + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 r =
        silu_mul_ps(_mm512_maskz_loadu_ps(m, gate + i), _mm512_maskz_loadu_ps(m, up + i));
    _mm512_mask_storeu_ps(out + i, m, r);
  }
}

void add(const float* x, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(
        y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

// F16C conversion rounds to nearest-even like fp32_to_fp16 (NaN payloads may differ).
void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  int64_t i = 0;
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_mask_storeu_epi16(bits + i, m, h);
    _mm512_mask_storeu_ps(rounded + i, m, _mm512_cvtph_ps(h));
  }
}

// (u + 0x7fff + ((u >> 16) & 1)) >> 16, NaNs made quiet: fp32_to_bf16 in integer lanes.
void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xffff) : tail_mask(n - i);
    const __m512i u = _mm512_maskz_loadu_epi32(m, x + i);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs_mask), inf);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    _mm256_mask_storeu_epi16(bits + i, m, _mm512_cvtepi32_epi16(r));
    _mm512_mask_storeu_ps(rounded + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(r, 16)));
  }
}

}  // namespace keel::kernels::avx512
