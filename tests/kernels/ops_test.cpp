// The element-wise ops of every SIMD table against the scalar table:
//   rms_norm   |Δ| ≤ 1e-6·|ref|       (squares summed in double in both; normally bit-equal)
//   silu_mul   |Δ| ≤ 1e-6·|ref| + 1e-30 (polynomial exp vs std::exp), incl. ±large, ±0
//   add        bit-equal
// plus RoPE identities and the parallel (many-row / long-vector) code paths. Paged attention has
// its own suite (paged_attention_test.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"

namespace keel::kernels {
namespace {

CpuFeatures ops_features_for(const KernelTable& table, CpuFeatures cpu) {
  if (!table.needs_bf16) cpu.avx512bf16 = false;
  return cpu;
}

class OpsTest : public ::testing::Test {
 protected:
  CpuFeatures cpu_ = detect_cpu_features();
  ThreadPool pool_{2};
  Ops scalar_{Isa::kScalar, &pool_, cpu_};
  std::mt19937 rng_{17};
};

TEST_F(OpsTest, RmsNormMatchesScalar) {
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    Ops ops(t->isa, &pool_, ops_features_for(*t, cpu_));
    for (int64_t dim : {1, 7, 16, 100, 2048}) {
      for (int64_t rows : {1, 3, 40}) {
        const auto x = testing::random_floats(rng_, rows * dim, 3.0f);
        const auto w = testing::random_floats(rng_, dim, 1.0f);
        std::vector<float> ref(x.size()), got(x.size());
        scalar_.rms_norm(x.data(), w.data(), rows, dim, 1e-5f, ref.data());
        ops.rms_norm(x.data(), w.data(), rows, dim, 1e-5f, got.data());
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_NEAR(got[i], ref[i], 1e-6f * std::fabs(ref[i]))
              << t->name << " dim " << dim << " rows " << rows << " i " << i;
        }
        std::vector<float> inplace = x;  // out may alias x
        ops.rms_norm(inplace.data(), w.data(), rows, dim, 1e-5f, inplace.data());
        EXPECT_EQ(inplace, got) << t->name;
      }
    }
  }
}

TEST_F(OpsTest, SiluMulMatchesScalar) {
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    Ops ops(t->isa, &pool_, ops_features_for(*t, cpu_));
    for (int64_t n : {1, 15, 16, 33, 100000}) {
      auto g = testing::random_floats(rng_, n, 4.0f);
      const auto u = testing::random_floats(rng_, n, 1.0f);
      const float extremes[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.5f, -88.5f, 87.0f, -87.0f, 20.0f};
      for (size_t i = 0; i < std::size(extremes) && i < g.size(); ++i) g[i] = extremes[i];
      std::vector<float> ref(g.size()), got(g.size());
      scalar_.silu_mul(g.data(), u.data(), n, ref.data());
      ops.silu_mul(g.data(), u.data(), n, got.data());
      for (size_t i = 0; i < ref.size(); ++i) {
        ASSERT_NEAR(got[i], ref[i], 1e-6f * std::fabs(ref[i]) + 1e-30f)
            << t->name << " n " << n << " gate " << g[i];
      }
    }
  }
}

TEST_F(OpsTest, AddIsExact) {
  for (const KernelTable* t : testing::runnable_tables(cpu_)) {
    Ops ops(t->isa, &pool_, ops_features_for(*t, cpu_));
    for (int64_t n : {1, 9, 64, 70000}) {
      const auto x = testing::random_floats(rng_, n, 1.0f);
      const auto y0 = testing::random_floats(rng_, n, 1.0f);
      std::vector<float> want = y0, got = y0;
      for (int64_t i = 0; i < n; ++i) want[i] += x[i];
      ops.add(x.data(), n, got.data());
      EXPECT_EQ(got, want) << t->name << " n " << n;
    }
  }
}

TEST_F(OpsTest, RopeRotatesPairs) {
  const int64_t head_dim = 8, n_heads = 2;
  for (bool neox : {false, true}) {
    RopeParams p;
    p.n_rot = 8;
    p.neox = neox;
    std::vector<float> x = testing::random_floats(rng_, 2 * n_heads * head_dim, 1.0f);
    const std::vector<float> orig = x;
    const int32_t pos[] = {0, 3};
    scalar_.rope(p, pos, 2, n_heads, head_dim, n_heads * head_dim, x.data());
    for (int64_t i = 0; i < n_heads * head_dim; ++i) EXPECT_EQ(x[i], orig[i]);  // position 0
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* a = &orig[n_heads * head_dim + h * head_dim];
      const float* b = &x[n_heads * head_dim + h * head_dim];
      // Rotation by 3 rad of the first pair (frequency 1) and norm preservation of every pair.
      const int64_t i0 = 0, i1 = neox ? 4 : 1;
      EXPECT_NEAR(b[i0], a[i0] * std::cos(3.0f) - a[i1] * std::sin(3.0f), 1e-5f);
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t u = neox ? i : 2 * i, w = neox ? i + 4 : 2 * i + 1;
        EXPECT_NEAR(a[u] * a[u] + a[w] * a[w], b[u] * b[u] + b[w] * b[w], 1e-5f);
      }
    }
  }
}

}  // namespace
}  // namespace keel::kernels
