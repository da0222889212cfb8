// Helpers shared by the kernel tests: seeded random activations and weight matrices of every
// weight type (including negative scales and all-zero blocks) and their row-group copies, a float
// reference matmul over dequantized weights, and the list of dispatch tables this CPU can run.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/weight_layout.h"

namespace keel::kernels::testing {

// The weight types matmul supports, in a fixed order.
inline const std::vector<DType>& matmul_types() {
  static const std::vector<DType> types = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ8_0,
                                           DType::kQ4_0, DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};
  return types;
}

// The tables this CPU supports; logs one line for each it skips.
inline std::vector<const KernelTable*> runnable_tables(const CpuFeatures& cpu) {
  std::vector<const KernelTable*> out;
  for (const KernelTable* t : all_tables()) {
    if (table_supported(*t, cpu)) {
      out.push_back(t);
    } else {
      std::printf("[ skipping ] kernel table %s: not supported by this CPU\n", t->name);
    }
  }
  return out;
}

inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float stddev) {
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// Activations [n_tokens][cols]; every third token gets an all-zero first block of 32 (and of
// 256 when cols allows), to exercise d = 0.
inline std::vector<float> random_activations(std::mt19937& rng, int64_t n_tokens, int64_t cols) {
  std::vector<float> x = random_floats(rng, n_tokens * cols, 1.0f);
  for (int64_t t = 0; t < n_tokens; t += 3) {
    const int64_t zero = cols >= 256 && cols % 256 == 0 ? 256 : (cols >= 32 ? 32 : 0);
    std::fill(x.begin() + t * cols, x.begin() + t * cols + zero, 0.0f);
  }
  return x;
}

// A weight matrix with owned storage.
struct TestMatrix {
  std::vector<std::byte> bytes;
  Matrix m;
};

// Random weights of `dtype`. F32/F16/BF16/Q4_0 come from quantize_row over random floats (Q4_0
// scales are then often negative); Q8_0 and the K-quants are random bytes with random-sign
// fp16 scales (so Q8_0 also gets negative scales and -128 quants). Row 1 (if any) is all zeros.
inline TestMatrix random_matrix(std::mt19937& rng, DType dtype, int64_t rows, int64_t cols) {
  TestMatrix tm;
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  tm.bytes.resize(row_bytes * static_cast<size_t>(rows));
  std::normal_distribution<float> scale(0.0f, 0.02f);
  std::uniform_int_distribution<int> byte(0, 255);
  const DTypeInfo& info = dtype_info(dtype);
  for (int64_t r = 0; r < rows; ++r) {
    std::byte* row = tm.bytes.data() + static_cast<size_t>(r) * row_bytes;
    if (r == 1) continue;  // all-zero row: zero scales and quants
    if (quantize_supports(dtype) && dtype != DType::kQ8_0) {
      const std::vector<float> f = random_floats(rng, cols, 0.5f);
      quantize_row(dtype, f.data(), row, cols);
      continue;
    }
    for (size_t i = 0; i < row_bytes; ++i) row[i] = static_cast<std::byte>(byte(rng));
    for (int64_t b = 0; b < cols / info.block_size; ++b) {
      std::byte* blk = row + b * info.block_bytes;
      const auto put = [&](size_t off) {
        const uint16_t h = fp32_to_fp16(scale(rng));
        std::memcpy(blk + off, &h, 2);
      };
      switch (dtype) {
        case DType::kQ8_0:
          put(0);
          break;
        case DType::kQ4_K:
        case DType::kQ5_K:
          put(0);
          put(2);
          break;
        case DType::kQ6_K:
          put(208);
          break;
        default:
          break;
      }
    }
  }
  tm.m = Matrix{dtype, rows, cols, tm.bytes.data(), row_bytes};
  return tm;
}

// The same matrix in the row-group layout (grouped_layout_supports(dtype) must hold).
inline TestMatrix grouped_copy(const TestMatrix& src) {
  TestMatrix g = src;
  group_rows_in_place(src.m.dtype, src.m.rows, src.m.row_bytes, g.bytes.data());
  g.m.data = g.bytes.data();
  g.m.layout = WeightLayout::kGrouped16;
  return g;
}

// Dequantized weights [rows][cols].
inline std::vector<float> dequantize_matrix(const Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    dequantize_row(m.dtype, m.data + static_cast<size_t>(r) * m.row_bytes, out.data() + r * m.cols,
                   m.cols);
  }
  return out;
}

// Column sizes to test for a weight type: several multiples of the block size (odd ones for the
// plain float types).
inline std::vector<int64_t> test_cols(DType dtype) {
  const int64_t bs = dtype_info(dtype).block_size;
  if (bs == 1) return {1, 15, 17, 64, 100};
  if (bs == 32) return {32, 96, 256, 544, 2080};  // 2080: past one 64-block GEMM chunk
  return {256, 512, 768};
}

}  // namespace keel::kernels::testing
