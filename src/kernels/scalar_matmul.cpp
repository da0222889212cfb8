// Scalar reference matmul kernels for F32, F16, BF16, Q8_0 and Q4_0 weights. They define the
// numerics every SIMD twin must reproduce: the same inputs (rounded / quantized activations), the
// same exact integer block dots, only the float summation order may differ.
//
// Pure functions over disjoint output rows; thread-safe.
#include <vector>

#include "core/fp16.h"
#include "kernels/blocks.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels::scalar {
namespace {

// y[t][r] = Σ_k row[k] · x[t][k] for one dequantized weight row.
void dot_row_all_tokens(const MatmulTask& task, const float* row, int64_t r) {
  const int64_t cols = task.w.cols;
  for (int64_t t = 0; t < task.n_tokens; ++t) {
    const float* xt = task.x + t * cols;
    float sum = 0.0f;
    for (int64_t k = 0; k < cols; ++k) sum += row[k] * xt[k];
    task.y[t * task.w.rows + r] = sum;
  }
}

template <float (*kToF32)(uint16_t)>
void matmul_half(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  std::vector<float> row(static_cast<size_t>(task.w.cols));
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* src = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    for (int64_t k = 0; k < task.w.cols; ++k)
      row[static_cast<size_t>(k)] = kToF32(load_u16(src + 2 * k));
    dot_row_all_tokens(task, row.data(), r);
  }
}

// Σ_b d_w[b]·d_a[b]·dot_b where dot_b = Σ_j wq[j]·aq[j] over block b, for one (row, token) pair.
// kDecode(blk, j) returns the signed integer weight j of a block.
template <int64_t kBlockBytes, int (*kDecode)(const uint8_t* qs, int j)>
float dot_q8_row(const std::byte* row, const int8_t* aq, const float* ad, int64_t nb) {
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b, row += kBlockBytes, aq += kQK) {
    const uint8_t* qs = as_u8(row + 2);
    int32_t dot = 0;
    for (int j = 0; j < kQK; ++j) dot += kDecode(qs, j) * aq[j];
    sum += static_cast<float>(dot) * (fp16_to_fp32(load_u16(row)) * ad[b]);
  }
  return sum;
}

int decode_q8_0(const uint8_t* qs, int j) { return static_cast<int8_t>(qs[j]); }
int decode_q4_0(const uint8_t* qs, int j) { return (j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4) - 8; }

template <int64_t kBlockBytes, int (*kDecode)(const uint8_t* qs, int j)>
void matmul_q8(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  const int64_t nb = task.w.cols / kQK;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const std::byte* row = task.w.data + static_cast<size_t>(r) * task.w.row_bytes;
    for (int64_t t = 0; t < task.n_tokens; ++t) {
      task.y[t * task.w.rows + r] = dot_q8_row<kBlockBytes, kDecode>(
          row, task.q8.qs + t * task.w.cols, task.q8.d + t * nb, nb);
    }
  }
}

}  // namespace

void matmul_f32(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const auto* row =
        reinterpret_cast<const float*>(task.w.data + static_cast<size_t>(r) * task.w.row_bytes);
    dot_row_all_tokens(task, row, r);
  }
}

void matmul_f16(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_half<fp16_to_fp32>(task, row_begin, row_end);
}

void matmul_bf16(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_half<bf16_to_fp32>(task, row_begin, row_end);
}

void matmul_q8_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_q8<kQ8_0Bytes, decode_q8_0>(task, row_begin, row_end);
}

void matmul_q4_0(const MatmulTask& task, int64_t row_begin, int64_t row_end) {
  matmul_q8<kQ4_0Bytes, decode_q4_0>(task, row_begin, row_end);
}

}  // namespace keel::kernels::scalar
