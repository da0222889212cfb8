// AVX2 (pmaddwd + add) K-quant matmul kernels: Q4_K, Q5_K and Q6_K weights against Q8_K
// activations. The implementation is shared with the other x86 tier in kquant_x86.h; this file
// instantiates it with this tier's target flags.
//
// Pure functions; thread-safe.
#define KEEL_KQUANT_VNNI 0
#include "kernels/kquant_x86.h"

#include "kernels/isa_kernels.h"

namespace keel::kernels::avx2 {
namespace {

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace

void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<4>(task, row_begin, row_end);
}

void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<5>(task, row_begin, row_end);
}

void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<6>(task, row_begin, row_end);
}

// Bit-identical to scalar::quantize_q8_k: the sign of the first element of largest magnitude
// picks the scale's sign; cvtps rounds half to even like ggml's nearest_int.
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQKK; ++b, x += kQKK, qs += kQKK, bsums += 16) {
    __m256 vmax = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i)
      vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float amax = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::memset(qs, 0, kQKK);
      std::memset(bsums, 0, 16 * sizeof(int16_t));
      continue;
    }
    float max = 0.0f;
    for (int i = 0; i < 32; ++i) {
      const int m = _mm256_movemask_ps(_mm256_cmp_ps(
          _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (m != 0) {
        max = x[8 * i + __builtin_ctz(static_cast<unsigned>(m))];
        break;
      }
    }
    const float iscale = -127.0f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    for (int i = 0; i < 8; ++i) {  // 32 values per step
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        q[k] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * i + 8 * k), vs)),
            _mm256_set1_epi32(127));
      }
      const __m256i s01 = _mm256_add_epi32(q[0], q[1]), s23 = _mm256_add_epi32(q[2], q[3]);
      bsums[2 * i] = static_cast<int16_t>(hsum_epi32(s01));
      bsums[2 * i + 1] = static_cast<int16_t>(hsum_epi32(s23));
      const __m256i p =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(
          reinterpret_cast<__m256i*>(qs + 32 * i),
          _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
    }
    d[b] = 1.0f / iscale;
  }
}

}  // namespace keel::kernels::avx2
