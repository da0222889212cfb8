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
  matmul_k<4>(task, row_begin, row_end);
}

void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<5>(task, row_begin, row_end);
}

void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_k<6>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx512
