// AVX2 kernels for the row-group layout: temporarily the row-major AVX2 kernels over groups put
// back in row order (grouped_via_rows.h).
#include "kernels/grouped_via_rows.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::avx2 {

void grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  grouped_via_rows<matmul_q8_0>(task, row_begin, row_end);
}
void grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  grouped_via_rows<matmul_q4_0>(task, row_begin, row_end);
}
void grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  grouped_via_rows<matmul_q4_k>(task, row_begin, row_end);
}
void grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  grouped_via_rows<matmul_q5_k>(task, row_begin, row_end);
}
void grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  grouped_via_rows<matmul_q6_k>(task, row_begin, row_end);
}

}  // namespace keel::kernels::avx2
