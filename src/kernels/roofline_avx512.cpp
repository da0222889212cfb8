// Roofline probes for AVX-512 F and VNNI (see roofline.h). Compiled with AVX-512 flags; called
// only when the CPU has them.
//
// Like a matmul micro-kernel: 4 "weight" and 4 "activation" vectors loaded from L1-resident rows
// feed a 4 × 4 tile of accumulators. (Register-only dependency chains measure the latency, not
// the throughput, of these instructions on some CPUs.)
#include <immintrin.h>

#include "kernels/roofline.h"
#include "kernels/roofline_tile.h"

namespace keel::kernels::probes {

double fma_f32_avx512(int64_t iters) {
  return tile_probe<__m512, 4, 4>(
      iters, 16 * 2, [](__m512 acc, __m512 w, __m512 x) { return _mm512_fmadd_ps(w, x, acc); });
}

double dpbusd_avx512(int64_t iters) {
  // vpdpbusd: 64 u8×s8 multiply-adds into 16 s32 lanes per instruction.
  return tile_probe<__m512i, 4, 4>(iters, 64 * 2, [](__m512i acc, __m512i w, __m512i x) {
    return _mm512_dpbusd_epi32(acc, w, x);
  });
}

}  // namespace keel::kernels::probes
