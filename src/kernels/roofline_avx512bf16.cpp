// Roofline probe for AVX512-BF16 `vdpbf16ps` (see roofline.h and roofline_tile.h). Compiled with
// AVX512-BF16 flags; called only when the CPU has them.
#include <immintrin.h>

#include "kernels/roofline.h"
#include "kernels/roofline_tile.h"

namespace keel::kernels::probes {

double dpbf16_avx512(int64_t iters) {
  // vdpbf16ps: 32 bf16 multiply-adds (pairs) into 16 f32 lanes per instruction.
  return tile_probe<__m512, 4, 4>(iters, 32 * 2, [](__m512 acc, __m512 w, __m512 x) {
    return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)x);
  });
}

}  // namespace keel::kernels::probes
