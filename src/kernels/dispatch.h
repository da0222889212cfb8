// KernelTable: the dispatch table of plain function pointers, one per op and weight type, that an
// Ops object selects once from the instruction-set tier. Tables: scalar (the reference), AVX2
// (AVX2+FMA+F16C), AVX-512 (F/BW/VL/DQ+VNNI) and AVX-512 with BF16. A table for a tier may only be
// called on a CPU that has the tier (kernel_table() checks it); SIMD code lives in per-ISA files
// compiled with their own target flags and runs only through these tables.
//
// Internal to the kernels module (and its tests / benchmarks). Tables are immutable constants;
// every kernel is a pure function, safe to call from any thread on disjoint outputs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/kernels.h"

namespace keel::kernels {

// Activations quantized per 32 elements as ggml's Q8_0 does (for Q8_0 and Q4_0 weights).
struct Q8Acts {
  const int8_t* qs = nullptr;  // [n_tokens][cols]
  const float* d = nullptr;    // [n_tokens][cols/32] block scales, fp16-rounded as ggml stores them
  const int32_t* sum = nullptr;  // [n_tokens][cols/32] Σ qs over each block
};

// Activations quantized per 256 elements as ggml's Q8_K does (for K-quant weights).
struct Q8KActs {
  const int8_t* qs = nullptr;      // [n_tokens][cols]
  const float* d = nullptr;        // [n_tokens][cols/256] (negative whenever the signed max is > 0)
  const int16_t* bsums = nullptr;  // [n_tokens][cols/16] Σ qs over each 16 elements
};

// One matmul call as the row kernels see it: y[t][r] = Σ_k w[r][k] · x[t][k].
struct MatmulTask {
  Matrix w;
  int64_t n_tokens = 0;
  // F32 weights: the caller's activations. F16/BF16 weights: activations rounded to the weight's
  // type (as llama.cpp does), stored as floats. [n_tokens][w.cols]
  const float* x = nullptr;
  const uint16_t* x16 = nullptr;  // F16/BF16 weights: the same rounded activations as raw bits
  Q8Acts q8;                      // Q8_0/Q4_0 weights
  Q8KActs q8k;                    // Q4_K/Q5_K/Q6_K weights
  float* y = nullptr;             // [n_tokens][w.rows]
};

// Computes y[t][r] for every token and every r in [row_begin, row_end).
using MatmulFn = void (*)(const MatmulTask& task, int64_t row_begin, int64_t row_end);
// Quantizes n floats (a multiple of 32) to Q8_0-style activations: qs[n], d[n/32], sum[n/32].
using QuantizeQ8Fn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, int32_t* sum);
// Quantizes n floats (a multiple of 256) to Q8_K-style activations: qs[n], d[n/256], bsums[n/16].
using QuantizeQ8KFn = void (*)(const float* x, int64_t n, int8_t* qs, float* d, int16_t* bsums);
// Rounds n floats to f16 or bf16 (nearest-even; bit-exact with fp32_to_fp16 / fp32_to_bf16 for
// every non-NaN input): bits[i] = the 16-bit value, rounded[i] = it widened back to f32.
using RoundHalfFn = void (*)(const float* x, int64_t n, uint16_t* bits, float* rounded);

// Positions per softmax tile in the row-at-a-time paged-attention kernels (scalar, AVX2): scores
// of a tile are computed for every head of the group, then folded into the running max / sum.
inline constexpr int32_t kAttentionTile = 32;
// Positions per K/V tile of the AVX-512 kernel, which takes a tile of query rows at once.
inline constexpr int32_t kKeyTile = 64;
// Query tokens per paged-attention work unit: consecutive tokens of one sequence (a prefill's)
// are computed together against each K/V tile, so every K/V row is read and widened once per
// kQueryTile tokens instead of once per token.
inline constexpr int32_t kQueryTile = 32;

// One paged-attention work unit: n_tok tokens of one sequence (block_table), each with the
// group = n_heads / n_kv_heads query heads that share KV head `kv_head`, over the positions
// [kv_begin, kv_end) of the sequence, token t only over those below n_kv[t]. Row r = t·group + g.
// The kernel leaves every row's unnormalised online-softmax state, with s_j = scale·q·k_j:
//   m = max_j s_j,  l = Σ_j e^(s_j − m),  acc = Σ_j e^(s_j − m)·v_j
// (m = −∞, l = 0, acc = 0 for a token with no position in the range). A row's bits depend only
// on its own query, its own positions and [kv_begin, kv_end), never on the tile's other tokens.
struct PagedAttentionTask {
  const float* q = nullptr;  // token t's [group][head_dim] query heads of kv_head: q + t·q_stride
  int64_t q_stride = 0;      // floats
  int32_t n_tok = 1;         // 1 ≤ n_tok ≤ kQueryTile
  const int32_t* n_kv = nullptr;         // [n_tok] each token's positions: [0, n_kv[t])
  const int32_t* block_table = nullptr;  // block ids of the sequence
  int64_t kv_head = 0;
  int32_t kv_begin = 0;  // 0 ≤ kv_begin < kv_end
  int32_t kv_end = 0;
  float* acc = nullptr;      // out: token t's [group][head_dim] at acc + t·acc_stride
  int64_t acc_stride = 0;    // floats
  float* m = nullptr;        // out: [n_tok·group]
  float* l = nullptr;        // out: [n_tok·group]
  float* scratch = nullptr;  // paged_attention_scratch_floats() floats of the calling thread
};

// Scratch a paged-attention kernel needs. Row-at-a-time kernels: one tile's scores of the group
// and its K and V rows widened to f32. The AVX-512 kernel: the scores of kQueryTile tokens' rows,
// the K tile widened and transposed ([head_dim][kKeyTile]), the V tile and the K tile widened, and
// a row of zeros (head_dim rounded up to 16 throughout).
inline int64_t paged_attention_scratch_floats(int64_t group, int64_t head_dim) {
  const int64_t dim16 = (head_dim + 15) / 16 * 16;
  return std::max(group * kAttentionTile + 2 * kAttentionTile * head_dim,
                  group * kQueryTile * kKeyTile + 3 * kKeyTile * dim16 + dim16);
}
using PagedAttentionFn = void (*)(const PagedKv& kv, const AttentionHeads& heads,
                                  const PagedAttentionTask& task);

struct KernelTable {
  const char* name;  // "scalar", "avx2", "avx512", "avx512-bf16"
  Isa isa;           // the tier whose features the table needs
  bool needs_bf16;   // additionally needs AVX512-BF16
  int64_t row_tile;  // matmul row ranges handed to threads are multiples of this (except the last)

  MatmulFn matmul_f32;
  MatmulFn matmul_f16;
  MatmulFn matmul_bf16;
  MatmulFn matmul_q8_0;
  MatmulFn matmul_q4_0;
  MatmulFn matmul_q4_k;
  MatmulFn matmul_q5_k;
  MatmulFn matmul_q6_k;
  // The same products for weights in the row-group layout (weight_layout.h). Row ranges start on
  // a group boundary (a multiple of kGroupRows); rows past the last full group are row-major.
  MatmulFn grouped_q8_0;
  MatmulFn grouped_q4_0;
  MatmulFn grouped_q4_k;
  MatmulFn grouped_q5_k;
  MatmulFn grouped_q6_k;

  QuantizeQ8Fn quantize_q8_0;
  QuantizeQ8KFn quantize_q8_k;
  RoundHalfFn round_f16;
  RoundHalfFn round_bf16;

  // out = x / rms(x) * weight over one row of `dim` (out may alias x).
  void (*rms_norm)(const float* x, const float* weight, int64_t dim, float eps, float* out);
  // out[i] = silu(gate[i]) * up[i] (out may alias gate or up).
  void (*silu_mul)(const float* gate, const float* up, int64_t n, float* out);
  // y[i] += x[i]
  void (*add)(const float* x, int64_t n, float* y);
  // One paged-attention work unit per KV dtype (see PagedAttentionTask).
  PagedAttentionFn paged_attention_f32;
  PagedAttentionFn paged_attention_f16;
  PagedAttentionFn paged_attention_q8_0;
};

const KernelTable& scalar_table();
const KernelTable& avx2_table();
const KernelTable& avx512_table();
const KernelTable& avx512_bf16_table();

// True when `cpu` can run every kernel of `table`.
bool table_supported(const KernelTable& table, const CpuFeatures& cpu);
// The table Ops uses for `isa` on `cpu`: the AVX-512 tier picks the BF16 variant when the CPU has
// AVX512-BF16. Aborts (KEEL_CHECK) when the CPU lacks the tier.
const KernelTable& kernel_table(Isa isa, const CpuFeatures& cpu);
// Every table, lowest first (tests and benchmarks loop over them).
std::vector<const KernelTable*> all_tables();
// The table's matmul kernel for a weight type in a layout (nullptr when not supported).
MatmulFn matmul_kernel(const KernelTable& table, DType dtype,
                       WeightLayout layout = WeightLayout::kRows);

}  // namespace keel::kernels
