// Declarations of every kernel the dispatch tables point at, one namespace per instruction set.
// Functions in avx2:: / avx512:: / avx512bf16:: are defined in files compiled with that ISA's
// target flags and must only be reached through a table whose tier the CPU supports.
//
// Pure functions; callable from any thread on disjoint outputs.
#pragma once

#include <cstdint>

#include "kernels/dispatch.h"

namespace keel::kernels {

namespace scalar {
void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void matmul_f32(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add(const float* x, int64_t n, float* y);
void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task);
}  // namespace scalar

namespace avx2 {
void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_f32(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
// Row-group layout (avx2_grouped_q8.cpp, avx2_grouped_kquant.cpp).
void grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add(const float* x, int64_t n, float* y);
void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task);
}  // namespace avx2

namespace avx512 {
void round_f16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void round_bf16(const float* x, int64_t n, uint16_t* bits, float* rounded);
void quantize_q8_k(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
void matmul_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_f32(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_f16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
// Packed prefill GEMMs (avx512_q8_gemm.cpp), bit-identical to the row kernels above; those
// switch to them from kQ8GemmMinTokens tokens on.
inline constexpr int64_t kQ8GemmMinTokens = 8;
void gemm_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
// Packed K-quant prefill GEMMs (avx512_kquant_gemm.cpp), bit-identical to the row kernels and
// the scalar twins; used from kKQuantGemmMinTokens tokens on.
inline constexpr int64_t kKQuantGemmMinTokens = 8;
void gemm_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
// Row-group layout (avx512_grouped_q8.cpp, avx512_grouped_kquant.cpp) and its GEMMs.
void grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_grouped_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_grouped_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_grouped_q4_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_grouped_q5_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void gemm_grouped_q6_k(const MatmulTask& task, int64_t row_begin, int64_t row_end);
void quantize_q8_0(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
void rms_norm(const float* x, const float* weight, int64_t dim, float eps, float* out);
void silu_mul(const float* gate, const float* up, int64_t n, float* out);
void add(const float* x, int64_t n, float* y);
void paged_attention_f32(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_f16(const PagedKv& kv, const AttentionHeads& heads,
                         const PagedAttentionTask& task);
void paged_attention_q8_0(const PagedKv& kv, const AttentionHeads& heads,
                          const PagedAttentionTask& task);
}  // namespace avx512

namespace avx512bf16 {
void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end);
}  // namespace avx512bf16

}  // namespace keel::kernels
