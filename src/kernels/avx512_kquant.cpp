// AVX-512 VNNI (vpdpwssd on 256-bit vectors) K-quant matmul kernels: Q4_K, Q5_K and Q6_K weights
// against Q8_K activations. The implementation is shared with the other x86 tier in kquant_x86.h;
// this file instantiates it with this tier's target flags.
//
// Pure functions; thread-safe.
#define KEEL_KQUANT_VNNI 1
#include "kernels/kquant_x86.h"

#include "kernels/isa_kernels.h"

namespace keel::kernels::avx512 {

void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens >= kKQuantGemmMinTokens) return gemm_q4_k(task, row_begin, row_end);
  matmul_k<4>(task, row_begin, row_end);
}

void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens >= kKQuantGemmMinTokens) return gemm_q5_k(task, row_begin, row_end);
  matmul_k<5>(task, row_begin, row_end);
}

void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  if (task.n_tokens >= kKQuantGemmMinTokens) return gemm_q6_k(task, row_begin, row_end);
  matmul_k<6>(task, row_begin, row_end);
}

// Bit-identical to scalar::quantize_q8_k: the sign of the first element of largest magnitude
// picks the scale's sign; cvtps rounds half to even like ggml's nearest_int.
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK, qs += kQKK, bsums += 16) {
    __m512 vmax = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i)
      vmax = _mm512_max_ps(vmax, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)));
    const float amax = _mm512_reduce_max_ps(vmax);
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qs, 0, kQKK);
      std::memset(bsums, 0, 16 * sizeof(int16_t));
      continue;
    }
    float max = 0.0f;
    for (int i = 0; i < 16; ++i) {
      const __mmask16 m = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * i)),
                                             _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (m != 0) {
        max = x[16 * i + __builtin_ctz(m)];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    for (int i = 0; i < 16; ++i) {
      __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * i), vs));
      q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * i), _mm512_cvtsepi32_epi8(q));
      bsums[i] = static_cast<int16_t>(_mm512_reduce_add_epi32(q));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace keel::kernels::avx512
