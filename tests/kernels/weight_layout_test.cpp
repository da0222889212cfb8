// The row-group layout (weight_layout.h): the permutation round-trips, rows read back exactly, the
// documented byte positions hold, and every table's grouped kernels (decode and GEMM paths)
// write bit-identical results to its row-major kernels — which matmul_test.cpp holds to the
// scalar twins — for ragged row counts, every token count path, threads and matmul_many.
#include "kernels/weight_layout.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace keel::kernels {
namespace {

using testing::grouped_copy;
using testing::random_activations;
using testing::runnable_tables;

const DType kGroupedTypes[] = {DType::kQ8_0, DType::kQ4_0, DType::kQ4_K, DType::kQ5_K,
                               DType::kQ6_K};

// Random bytes in every quant and scale field (so K-quant 6-bit scales use their top bits too),
// with small random fp16 super-block / block scales.
testing::TestMatrix random_bytes_matrix(std::mt19937& rng, DType dtype, int64_t rows,
                                        int64_t cols) {
  testing::TestMatrix tm;
  const size_t row_bytes = dtype_row_bytes(dtype, cols);
  tm.bytes.resize(row_bytes * static_cast<size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> scale(0.0f, 0.02f);
  for (auto& b : tm.bytes) b = static_cast<std::byte>(byte(rng));
  const DTypeInfo& info = dtype_info(dtype);
  for (int64_t blk = 0; blk < rows * (cols / info.block_size); ++blk) {
    std::byte* p = tm.bytes.data() + blk * info.block_bytes;
    const auto put = [&](size_t off) {
      const uint16_t h = fp32_to_fp16(scale(rng));
      std::memcpy(p + off, &h, 2);
    };
    if (dtype == DType::kQ6_K) {
      put(208);
    } else {
      put(0);
      if (dtype == DType::kQ4_K || dtype == DType::kQ5_K) put(2);
    }
  }
  tm.m = Matrix{dtype, rows, cols, tm.bytes.data(), row_bytes};
  return tm;
}

CpuFeatures layout_features_for(const KernelTable& table, CpuFeatures cpu) {
  if (!table.needs_bf16) cpu.avx512bf16 = false;
  return cpu;
}

int64_t cols_for(DType dtype) { return dtype_info(dtype).block_size == 32 ? 2080 : 768; }

TEST(WeightLayoutTest, GroupingRoundTripsAndRowsReadBack) {
  std::mt19937 rng(21);
  for (DType dtype : kGroupedTypes) {
    for (int64_t rows : {1, 15, 16, 33, 48}) {
      const int64_t cols = cols_for(dtype);
      const auto src = random_bytes_matrix(rng, dtype, rows, cols);
      auto g = grouped_copy(src);
      if (rows >= 16) {
        EXPECT_NE(g.bytes, src.bytes) << dtype_name(dtype) << " rows " << rows;
      }
      std::vector<std::byte> row(src.m.row_bytes);
      std::vector<float> want(static_cast<size_t>(cols)), got(want.size());
      for (int64_t r = 0; r < rows; ++r) {
        read_row(g.m, r, row.data());
        ASSERT_EQ(0, std::memcmp(row.data(), src.bytes.data() + r * src.m.row_bytes, row.size()))
            << dtype_name(dtype) << " row " << r << " of " << rows;
        dequantize_row(dtype, src.bytes.data() + r * src.m.row_bytes, want.data(), cols);
        dequantize_matrix_row(g.m, r, got.data());
        ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)));
      }
      ungroup_rows_in_place(dtype, rows, src.m.row_bytes, g.bytes.data());
      EXPECT_EQ(g.bytes, src.bytes) << dtype_name(dtype) << " rows " << rows;
    }
  }
}

// Spot checks of the documented positions: the first block of a group holds row r's fp16 scale
// at 2r and its quant bytes 4k..4k+3 at 16·(field offset) + (16k + r)·4.
TEST(WeightLayoutTest, BytesSitWhereTheHeaderSays) {
  std::mt19937 rng(3);
  const auto src = random_bytes_matrix(rng, DType::kQ4_0, 16, 64);
  const auto g = grouped_copy(src);
  const size_t rb = src.m.row_bytes;
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(0, std::memcmp(&g.bytes[2 * r], &src.bytes[r * rb], 2));
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(0, std::memcmp(&g.bytes[32 + (16 * k + r) * 4], &src.bytes[r * rb + 2 + 4 * k], 4));
    }
    // The second block of the group starts at 16·18 bytes.
    EXPECT_EQ(0, std::memcmp(&g.bytes[288 + 2 * r], &src.bytes[r * rb + 18], 2));
  }
  const auto k6 = random_bytes_matrix(rng, DType::kQ6_K, 16, 256);
  const auto g6 = grouped_copy(k6);
  for (int r = 0; r < 16; ++r) {
    EXPECT_EQ(0, std::memcmp(&g6.bytes[3328 + 2 * r], &k6.bytes[r * 210 + 208], 2));
    for (int s = 0; s < 16; ++s)
      EXPECT_EQ(g6.bytes[3072 + 16 * s + r], k6.bytes[r * 210 + 192 + s]);
  }
}

std::vector<float> run(const KernelTable& table, int threads, const Matrix& w,
                       const std::vector<float>& x, int64_t n_tokens) {
  ThreadPool pool(threads);
  Ops ops(table.isa, &pool, layout_features_for(table, detect_cpu_features()));
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows), NAN);
  ops.matmul(w, x.data(), n_tokens, y.data());
  return y;
}

// Σ_k |w[r][k]·x[t][k]| over the dequantized weights: the scale of a row's f32 rounding error.
std::vector<double> abs_dots(const Matrix& w, const std::vector<float>& x, int64_t n_tokens) {
  const std::vector<float> wf = testing::dequantize_matrix(w);
  std::vector<double> s(static_cast<size_t>(n_tokens * w.rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < w.rows; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < w.cols; ++k)
        acc += std::fabs(double(wf[r * w.cols + k]) * x[t * w.cols + k]);
      s[t * w.rows + r] = acc;
    }
  }
  return s;
}

// Tokens 1–7 take the decode kernels (tiles of 4, 3, 2, 1), 8 and more the GEMMs. Each table's
// row-major result is first checked against the scalar twin (K-quants: exactly; Q8_0/Q4_0 within
// 2e-6·Σ|w·x|, f32 order only), so two equally wrong kernels cannot pass together.
TEST(WeightLayoutTest, GroupedKernelsEqualRowMajorKernelsBitForBit) {
  std::mt19937 rng(77);
  const CpuFeatures cpu = detect_cpu_features();
  for (DType dtype : kGroupedTypes) {
    const bool kquant = dtype_info(dtype).block_size == 256;
    for (int64_t rows : {16, 45, 300}) {
      const auto src = random_bytes_matrix(rng, dtype, rows, cols_for(dtype));
      const auto g = grouped_copy(src);
      for (int64_t n_tokens : {1, 2, 3, 5, 7, 8, 29}) {
        const auto x = random_activations(rng, n_tokens, src.m.cols);
        const auto ref = run(scalar_table(), 1, src.m, x, n_tokens);
        const auto s = abs_dots(src.m, x, n_tokens);
        for (const KernelTable* table : runnable_tables(cpu)) {
          const auto want = run(*table, 2, src.m, x, n_tokens);
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_LE(std::fabs(double(want[i]) - ref[i]), kquant ? 0.0 : 2e-6 * s[i] + 1e-30)
                << table->name << " " << dtype_name(dtype) << " rows " << rows << " tokens "
                << n_tokens << " index " << i << ": " << want[i] << " vs scalar " << ref[i];
          }
          for (int threads : {1, 2, 3}) {
            const auto got = run(*table, threads, g.m, x, n_tokens);
            ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
                << table->name << " " << dtype_name(dtype) << " rows " << rows << " tokens "
                << n_tokens << " threads " << threads;
          }
        }
      }
    }
  }
}

// matmul_many over grouped and row-major matrices with ragged row counts writes what separate
// row-major calls write.
TEST(WeightLayoutTest, MatmulManyMixesLayouts) {
  std::mt19937 rng(9);
  const int64_t cols = 512;
  const auto a = random_bytes_matrix(rng, DType::kQ4_K, 37, cols);
  const auto b = random_bytes_matrix(rng, DType::kQ6_K, 64, cols);
  const auto c = random_bytes_matrix(rng, DType::kQ5_K, 21, cols);
  const auto ga = grouped_copy(a), gc = grouped_copy(c);
  const Matrix mixed[] = {ga.m, b.m, gc.m};
  const Matrix plain[] = {a.m, b.m, c.m};
  for (int64_t n_tokens : {1, 12}) {
    const auto x = random_activations(rng, n_tokens, cols);
    for (const KernelTable* table : runnable_tables(detect_cpu_features())) {
      ThreadPool pool(2);
      Ops ops(table->isa, &pool, layout_features_for(*table, detect_cpu_features()));
      std::vector<std::vector<float>> ys;
      std::vector<float*> ptrs;
      for (const Matrix& m : mixed) ys.emplace_back(static_cast<size_t>(n_tokens * m.rows), NAN);
      for (auto& y : ys) ptrs.push_back(y.data());
      ops.matmul_many(mixed, x.data(), n_tokens, ptrs);
      for (size_t i = 0; i < 3; ++i) {
        const auto want = run(*table, 1, plain[i], x, n_tokens);
        ASSERT_EQ(0, std::memcmp(want.data(), ys[i].data(), want.size() * sizeof(float)))
            << table->name << " matrix " << i << " tokens " << n_tokens;
      }
    }
  }
}

}  // namespace
}  // namespace keel::kernels
