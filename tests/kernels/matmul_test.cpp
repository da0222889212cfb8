// Matmul across every dispatch table the CPU supports and every weight type:
//  - SIMD vs the scalar twin. Both see the same prepared activations (rounded to f16/bf16 or
//    quantized to Q8_0/Q8_K bit-identically), so only f32 summation order differs. Bound:
//    |Δ| ≤ tol · S with S = Σ_k |w[r][k]·x'[t][k]| (x' = the activations as the kernels use them);
//    tol = 1e-5 for the float paths and 1e-6 for the int8 paths (exact integer block dots).
//  - Every table vs a double-precision dot over dequantized weights and the caller's f32
//    activations, within the error the activation rounding / quantization can cause (see
//    reference_bound()).
//  - Results bit-identical with 1, 2 and 3 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/isa_kernels.h"

namespace keel::kernels {
namespace {

using testing::dequantize_matrix;
using testing::matmul_types;
using testing::random_activations;
using testing::random_matrix;
using testing::runnable_tables;
using testing::test_cols;

struct Shape {
  int64_t rows;
  int64_t n_tokens;
};
// Rows not multiples of the thread count or the SIMD tile (8 / 16), tokens 1..17.
const Shape kShapes[] = {{1, 1}, {13, 1}, {37, 2},  {16, 3}, {45, 4},
                         {7, 5}, {33, 7}, {20, 17}, {50, 40}};

// The CPU features to hand Ops so that it picks exactly `table`.
CpuFeatures features_for(const KernelTable& table, CpuFeatures cpu) {
  if (!table.needs_bf16) cpu.avx512bf16 = false;
  return cpu;
}

std::vector<float> run_matmul(const KernelTable& table, const CpuFeatures& cpu, int threads,
                              const Matrix& w, const std::vector<float>& x, int64_t n_tokens) {
  ThreadPool pool(threads);
  Ops ops(table.isa, &pool, features_for(table, cpu));
  EXPECT_EQ(ops.kernel_name(), table.name);
  std::vector<float> y(static_cast<size_t>(n_tokens * w.rows), NAN);
  ops.matmul(w, x.data(), n_tokens, y.data());
  return y;
}

bool kquant(DType dtype) {
  return dtype == DType::kQ4_K || dtype == DType::kQ5_K || dtype == DType::kQ6_K;
}

bool int8_path(DType dtype) {
  return dtype == DType::kQ8_0 || dtype == DType::kQ4_0 || dtype == DType::kQ4_K ||
         dtype == DType::kQ5_K || dtype == DType::kQ6_K;
}

// The activations as the kernels use them: rounded to f16/bf16, or quantized and dequantized.
std::vector<float> effective_activations(DType dtype, const std::vector<float>& x, int64_t cols) {
  std::vector<float> out(x.size());
  const int64_t n_tokens = static_cast<int64_t>(x.size()) / cols;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* xt = x.data() + t * cols;
    float* ot = out.data() + t * cols;
    std::vector<int8_t> qs(static_cast<size_t>(cols));
    std::vector<float> d(static_cast<size_t>(cols / 32 + 1));
    std::vector<int32_t> sum(d.size());
    std::vector<int16_t> bsums(static_cast<size_t>(cols / 16 + 1));
    switch (dtype) {
      case DType::kF16:
        for (int64_t k = 0; k < cols; ++k) ot[k] = fp16_to_fp32(fp32_to_fp16(xt[k]));
        break;
      case DType::kBF16:
        for (int64_t k = 0; k < cols; ++k) ot[k] = bf16_to_fp32(fp32_to_bf16(xt[k]));
        break;
      case DType::kQ8_0:
      case DType::kQ4_0:
        scalar::quantize_q8_0(xt, cols, qs.data(), d.data(), sum.data());
        for (int64_t k = 0; k < cols; ++k) ot[k] = qs[k] * d[k / 32];
        break;
      case DType::kQ4_K:
      case DType::kQ5_K:
      case DType::kQ6_K:
        scalar::quantize_q8_k(xt, cols, qs.data(), d.data(), bsums.data());
        for (int64_t k = 0; k < cols; ++k) ot[k] = qs[k] * d[k / 256];
        break;
      default:
        std::copy(xt, xt + cols, ot);
        break;
    }
  }
  return out;
}

// S[t][r] = Σ_k |w[r][k]·x[t][k]|.
std::vector<double> abs_dot(const std::vector<float>& w, const std::vector<float>& x, int64_t rows,
                            int64_t cols, int64_t n_tokens) {
  std::vector<double> s(static_cast<size_t>(n_tokens * rows));
  for (int64_t t = 0; t < n_tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k)
        acc += std::fabs(double(w[r * cols + k]) * x[t * cols + k]);
      s[t * rows + r] = acc;
    }
  }
  return s;
}

// Worst-case |y − Σ w·x| caused by preparing the activations, plus 1e-5·S for f32 arithmetic:
//   F16 / BF16: rounding x costs ≤ 2^-11 / 2^-8 relative per element.
//   Q8_0 / Q4_0: |x − x_q| ≤ amax_block / 254 per element, and the fp16 block scale adds
//     ≤ 2^-11 relative to every term.   K-quants: |x − x_q| ≤ amax_256 / 254 (f32 scale).
double reference_bound(DType dtype, const float* w_row, const float* x_row, int64_t cols,
                       double s) {
  double bound = 1e-5 * s;
  if (dtype == DType::kF16) bound += s * std::ldexp(1.0, -11);
  if (dtype == DType::kBF16) bound += s * std::ldexp(1.0, -8);
  if (!int8_path(dtype)) return bound;
  const int64_t block = dtype == DType::kQ8_0 || dtype == DType::kQ4_0 ? 32 : 256;
  for (int64_t b = 0; b < cols; b += block) {
    double amax = 0, wsum = 0;
    for (int64_t k = b; k < b + block; ++k) {
      amax = std::max(amax, double(std::fabs(x_row[k])));
      wsum += std::fabs(w_row[k]);
    }
    bound += amax / 254.0 * wsum * 1.0001;
  }
  if (block == 32) bound += s * std::ldexp(1.0, -11) * 1.01;
  return bound;
}

class MatmulTest : public ::testing::Test {
 protected:
  CpuFeatures cpu_ = detect_cpu_features();
};

TEST_F(MatmulTest, EveryTableMatchesScalarTwin) {
  std::mt19937 rng(1234);
  for (DType dtype : matmul_types()) {
    double worst = 0;  // max |Δ| / S seen, reported below
    for (int64_t cols : test_cols(dtype)) {
      for (const Shape& shape : kShapes) {
        const auto w = random_matrix(rng, dtype, shape.rows, cols);
        const auto x = random_activations(rng, shape.n_tokens, cols);
        const auto ref = run_matmul(scalar_table(), cpu_, 1, w.m, x, shape.n_tokens);
        const auto s = abs_dot(dequantize_matrix(w.m), effective_activations(dtype, x, cols),
                               shape.rows, cols, shape.n_tokens);
        // K-quants: every table scales the same exact integer totals as the scalar twin does.
        const double tol = kquant(dtype) ? 0.0 : int8_path(dtype) ? 1e-6 : 1e-5;
        for (const KernelTable* table : runnable_tables(cpu_)) {
          const auto y = run_matmul(*table, cpu_, 2, w.m, x, shape.n_tokens);
          for (size_t i = 0; i < y.size(); ++i) {
            const double diff = std::fabs(double(y[i]) - ref[i]);
            ASSERT_LE(diff, tol * s[i] + 1e-30)
                << table->name << " " << dtype_name(dtype) << " rows=" << shape.rows
                << " cols=" << cols << " tokens=" << shape.n_tokens << " index " << i << ": simd "
                << y[i] << " scalar " << ref[i];
            if (s[i] > 0) worst = std::max(worst, diff / s[i]);
          }
        }
      }
    }
    std::printf("[   info   ] %s: max |simd - scalar| / S = %.3g\n",
                std::string(dtype_name(dtype)).c_str(), worst);
  }
}

TEST_F(MatmulTest, EveryTableMatchesDequantizedReference) {
  std::mt19937 rng(99);
  for (DType dtype : matmul_types()) {
    for (int64_t cols : test_cols(dtype)) {
      const Shape shape{19, 3};
      const auto w = random_matrix(rng, dtype, shape.rows, cols);
      const auto x = random_activations(rng, shape.n_tokens, cols);
      const auto wf = dequantize_matrix(w.m);
      const auto s = abs_dot(wf, x, shape.rows, cols, shape.n_tokens);
      for (const KernelTable* table : runnable_tables(cpu_)) {
        const auto y = run_matmul(*table, cpu_, 2, w.m, x, shape.n_tokens);
        for (int64_t t = 0; t < shape.n_tokens; ++t) {
          for (int64_t r = 0; r < shape.rows; ++r) {
            double ref = 0;
            for (int64_t k = 0; k < cols; ++k) ref += double(wf[r * cols + k]) * x[t * cols + k];
            const size_t i = static_cast<size_t>(t * shape.rows + r);
            const double bound =
                reference_bound(dtype, &wf[r * cols], &x[t * cols], cols, s[i]) + 1e-30;
            ASSERT_LE(std::fabs(y[i] - ref), bound)
                << table->name << " " << dtype_name(dtype) << " cols=" << cols << " t=" << t
                << " r=" << r << ": got " << y[i] << " want " << ref;
          }
        }
      }
    }
  }
}

TEST_F(MatmulTest, ResultsDoNotDependOnThreadCount) {
  std::mt19937 rng(7);
  for (DType dtype : matmul_types()) {
    const int64_t cols = test_cols(dtype)[1];
    for (const Shape& shape : {Shape{37, 1}, Shape{50, 5}}) {
      const auto w = random_matrix(rng, dtype, shape.rows, cols);
      const auto x = random_activations(rng, shape.n_tokens, cols);
      for (const KernelTable* table : runnable_tables(cpu_)) {
        const auto y1 = run_matmul(*table, cpu_, 1, w.m, x, shape.n_tokens);
        for (int threads : {2, 3}) {
          const auto yn = run_matmul(*table, cpu_, threads, w.m, x, shape.n_tokens);
          ASSERT_EQ(0, std::memcmp(y1.data(), yn.data(), y1.size() * sizeof(float)))
              << table->name << " " << dtype_name(dtype) << " with " << threads << " threads";
        }
      }
    }
  }
}

// A token's outputs are bit-identical whether it is computed alone or in a batch (the engine's
// batched and one-at-a-time runs agree), although batches take other paths: Q8_0/Q4_0 switch to
// a packed GEMM, float prefill walks rows in L2-sized blocks (300 rows of 1024 floats span
// several), and the token tiles differ in shape.
TEST_F(MatmulTest, ResultsDoNotDependOnTheBatch) {
  std::mt19937 rng(11);
  for (DType dtype : matmul_types()) {
    const int64_t block = dtype_info(dtype).block_size;
    const int64_t cols = block == 1 ? 1024 : block == 32 ? 2080 : 512;
    const int64_t rows = 300, n_tokens = 29;
    const auto w = random_matrix(rng, dtype, rows, cols);
    const auto x = random_activations(rng, n_tokens, cols);
    for (const KernelTable* table : runnable_tables(cpu_)) {
      const auto batch = run_matmul(*table, cpu_, 2, w.m, x, n_tokens);
      for (int64_t t = 0; t < n_tokens; ++t) {
        const std::vector<float> xt(x.begin() + t * cols, x.begin() + (t + 1) * cols);
        const auto alone = run_matmul(*table, cpu_, 2, w.m, xt, 1);
        ASSERT_EQ(0, std::memcmp(alone.data(), batch.data() + t * rows, rows * sizeof(float)))
            << table->name << " " << dtype_name(dtype) << " token " << t;
      }
    }
  }
}

// matmul_many writes exactly what separate matmul calls write, whether the matrices share one
// prepared activation format (one pool job over all their rows) or not (one call each), up to
// kMaxMatmulMany matrices (gate and up of 8 MoE experts).
TEST_F(MatmulTest, MatmulManyEqualsSeparateCalls) {
  std::mt19937 rng(5);
  const int64_t cols = 512;
  const std::vector<std::vector<DType>> groups = {
      {DType::kQ8_0, DType::kQ4_0, DType::kQ8_0},
      {DType::kQ4_K, DType::kQ6_K, DType::kQ5_K},
      {DType::kF16, DType::kF16},
      {DType::kF16, DType::kQ8_0, DType::kF32},
      std::vector<DType>(Ops::kMaxMatmulMany, DType::kQ4_0),
      std::vector<DType>(Ops::kMaxMatmulMany, DType::kQ4_K)};
  const int64_t rows[] = {37, 16, 9};
  for (const auto& group : groups) {
    std::vector<testing::TestMatrix> ws;
    std::vector<Matrix> ms;
    for (size_t i = 0; i < group.size(); ++i) {
      ws.push_back(random_matrix(rng, group[i], rows[i % 3], cols));
    }
    for (const auto& w : ws) ms.push_back(w.m);
    for (int64_t n_tokens : {1, 20}) {
      const auto x = random_activations(rng, n_tokens, cols);
      for (const KernelTable* table : runnable_tables(cpu_)) {
        for (int threads : {2, 3}) {
          ThreadPool pool(threads);
          Ops ops(table->isa, &pool, features_for(*table, cpu_));
          std::vector<std::vector<float>> ys;
          std::vector<float*> ptrs;
          for (const Matrix& m : ms) ys.emplace_back(static_cast<size_t>(n_tokens * m.rows), NAN);
          for (auto& y : ys) ptrs.push_back(y.data());
          ops.matmul_many(ms, x.data(), n_tokens, ptrs);
          for (size_t i = 0; i < ms.size(); ++i) {
            const auto want = run_matmul(*table, cpu_, threads, ms[i], x, n_tokens);
            ASSERT_EQ(0, std::memcmp(want.data(), ys[i].data(), want.size() * sizeof(float)))
                << table->name << " matrix " << i << " (" << dtype_name(group[i]) << ") tokens "
                << n_tokens << " threads " << threads;
          }
        }
      }
    }
  }
}

// The fused forms (RMSNorm or SiLU·mul computed while the activations are prepared) write
// exactly what the separate ops followed by the matmuls write, for every activation format.
TEST_F(MatmulTest, FusedMatmulsEqualSeparateOps) {
  std::mt19937 rng(8);
  const int64_t cols = 512;
  std::vector<float> norm_w(static_cast<size_t>(cols));
  std::normal_distribution<float> dist(1.0f, 0.3f);
  for (auto& v : norm_w) v = dist(rng);
  for (DType dtype : matmul_types()) {
    const auto w1 = random_matrix(rng, dtype, 23, cols);
    const auto w2 = random_matrix(rng, dtype, 17, cols);
    const Matrix ms[] = {w1.m, w2.m};
    for (int64_t n_tokens : {1, 20}) {
      const auto x = random_activations(rng, n_tokens, cols);
      const auto up = random_activations(rng, n_tokens, cols);
      for (const KernelTable* table : runnable_tables(cpu_)) {
        ThreadPool pool(2);
        Ops ops(table->isa, &pool, features_for(*table, cpu_));
        const auto n = static_cast<size_t>(n_tokens * cols);
        std::vector<float> xn(n), y1(static_cast<size_t>(n_tokens * 23)),
            y2(static_cast<size_t>(n_tokens * 17));
        ops.rms_norm(x.data(), norm_w.data(), n_tokens, cols, 1e-5f, xn.data());
        std::vector<float> want1(y1.size()), want2(y2.size());
        float* const want[] = {want1.data(), want2.data()};
        ops.matmul_many(ms, xn.data(), n_tokens, want);
        float* const got[] = {y1.data(), y2.data()};
        ops.rms_norm_matmul_many(ms, x.data(), norm_w.data(), 1e-5f, n_tokens, got);
        ASSERT_EQ(want1, y1) << table->name << " " << dtype_name(dtype) << " rms_norm, "
                             << n_tokens;
        ASSERT_EQ(want2, y2) << table->name << " " << dtype_name(dtype) << " rms_norm, "
                             << n_tokens;

        std::vector<float> act(n);
        ops.silu_mul(x.data(), up.data(), static_cast<int64_t>(n), act.data());
        ops.matmul(w1.m, act.data(), n_tokens, want1.data());
        ops.silu_mul_matmul(w1.m, x.data(), up.data(), n_tokens, y1.data());
        ASSERT_EQ(want1, y1) << table->name << " " << dtype_name(dtype) << " silu_mul, "
                             << n_tokens;
      }
    }
  }
}

// silu_mul_matmul_many — each matrix over its own silu(gate)·up, all rows in one pool job —
// writes exactly what one silu_mul_matmul call per matrix writes: every table, F32, Q8_0, Q4_0
// and Q4_K (and a group mixing activation formats, which runs matrix by matrix), row-major and
// row-group layouts mixed, ragged row counts, 1 to kMaxMatmulMany matrices, 1 and 7 tokens, 2
// and 3 threads.
TEST_F(MatmulTest, SiluMulMatmulManyEqualsSeparateCalls) {
  std::mt19937 rng(13);
  const int64_t cols = 512;
  const int64_t rows[] = {37, 16, 9, 64, 21};
  std::vector<std::vector<DType>> groups;
  for (DType dtype : {DType::kF32, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K}) {
    for (size_t count : {size_t{1}, size_t{4}, Ops::kMaxMatmulMany}) {
      groups.emplace_back(count, dtype);
    }
  }
  groups.push_back({DType::kQ4_K, DType::kQ8_0, DType::kQ4_0, DType::kF16, DType::kQ6_K});
  for (const auto& group : groups) {
    std::vector<testing::TestMatrix> ws;
    std::vector<Matrix> ms;
    for (size_t i = 0; i < group.size(); ++i) {
      ws.push_back(random_matrix(rng, group[i], rows[i % 5], cols));
      // Every other matrix of a groupable type in the row-group layout.
      if (i % 2 == 1 && grouped_layout_supports(group[i])) ws.back() = testing::grouped_copy(ws[i]);
    }
    for (const auto& w : ws) ms.push_back(w.m);
    for (int64_t n_tokens : {1, 7}) {
      std::vector<std::vector<float>> gates, ups;
      std::vector<const float*> gate_ptrs, up_ptrs;
      for (size_t i = 0; i < ms.size(); ++i) {
        gates.push_back(random_activations(rng, n_tokens, cols));
        ups.push_back(random_activations(rng, n_tokens, cols));
      }
      for (size_t i = 0; i < ms.size(); ++i) {
        gate_ptrs.push_back(gates[i].data());
        up_ptrs.push_back(ups[i].data());
      }
      for (const KernelTable* table : runnable_tables(cpu_)) {
        for (int threads : {2, 3}) {
          ThreadPool pool(threads);
          Ops ops(table->isa, &pool, features_for(*table, cpu_));
          std::vector<std::vector<float>> ys;
          std::vector<float*> ptrs;
          for (const Matrix& m : ms) ys.emplace_back(static_cast<size_t>(n_tokens * m.rows), NAN);
          for (auto& y : ys) ptrs.push_back(y.data());
          ops.silu_mul_matmul_many(ms, gate_ptrs, up_ptrs, n_tokens, ptrs);
          for (size_t i = 0; i < ms.size(); ++i) {
            std::vector<float> want(ys[i].size(), NAN);
            ops.silu_mul_matmul(ms[i], gates[i].data(), ups[i].data(), n_tokens, want.data());
            ASSERT_EQ(0, std::memcmp(want.data(), ys[i].data(), want.size() * sizeof(float)))
                << table->name << " matrix " << i << " of " << ms.size() << " ("
                << dtype_name(group[i]) << (ms[i].layout == WeightLayout::kRows ? "" : " grouped")
                << ") tokens " << n_tokens << " threads " << threads;
          }
        }
      }
    }
  }
}

TEST_F(MatmulTest, ZeroTokensOrRowsWriteNothing) {
  std::mt19937 rng(3);
  const auto w = random_matrix(rng, DType::kQ8_0, 4, 64);
  const std::vector<float> x(64, 1.0f);
  ThreadPool pool(2);
  Ops ops(Isa::kScalar, &pool, cpu_);
  std::vector<float> y(4, 42.0f);
  ops.matmul(w.m, x.data(), 0, y.data());
  EXPECT_EQ(y, std::vector<float>(4, 42.0f));
}

}  // namespace
}  // namespace keel::kernels
