// Roofline probes for AVX2 + FMA (see roofline.h and roofline_tile.h). Compiled with AVX2 flags;
// called only when the CPU has AVX2 and FMA.
#include <immintrin.h>

#include "kernels/roofline.h"
#include "kernels/roofline_tile.h"

namespace keel::kernels::probes {

double fma_f32_avx2(int64_t iters) {
  return tile_probe<__m256, 2, 4>(
      iters, 8 * 2, [](__m256 acc, __m256 w, __m256 x) { return _mm256_fmadd_ps(w, x, acc); });
}

double maddubs_avx2(int64_t iters) {
  // The int8 dot product of AVX2 kernels: maddubs (u8×s8 → s16 pairs), madd with ones (→ s32),
  // add: 32 multiply-adds per 3 instructions.
  return tile_probe<__m256i, 2, 4>(iters, 32 * 2, [](__m256i acc, __m256i w, __m256i x) {
    return _mm256_add_epi32(acc,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
  });
}

float read_avx2(const float* p, int64_t n) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 64) {
    for (int j = 0; j < 8; ++j) acc[j] = _mm256_add_ps(acc[j], _mm256_loadu_ps(p + i + 8 * j));
  }
  __m256 s = acc[0];
  for (int j = 1; j < 8; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0;
  for (float v : lanes) total += v;
  return total;
}

void triad_avx2(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 16) {
    _mm256_storeu_ps(a + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i), _mm256_loadu_ps(b + i)));
    _mm256_storeu_ps(a + i + 8,
                     _mm256_fmadd_ps(vs, _mm256_loadu_ps(c + i + 8), _mm256_loadu_ps(b + i + 8)));
  }
}

}  // namespace keel::kernels::probes
