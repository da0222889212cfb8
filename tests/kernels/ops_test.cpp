// The element-wise ops of every SIMD table against the scalar table:
//   rms_norm   |Δ| ≤ 1e-6·|ref|       (squares summed in double in both; normally bit-equal)
//   silu_mul   |Δ| ≤ 1e-6·|ref| + 1e-30 (polynomial exp vs std::exp), incl. ±large, ±0
//   add        bit-equal
// plus RoPE identities, YaRN RoPE against a double-precision implementation of the formula and its
// correction range against ggml's, and the parallel (many-row / long-vector) code paths. Paged
// attention has its own suite (paged_attention_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "core/thread_pool.h"
#include "kernel_test_util.h"
#include "kernels/rope.h"

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

// YaRN's correction range computed here in double: the pair that turns β times over orig_ctx
// positions is n_rot·ln(orig_ctx / (2π·β)) / (2·ln base); low is the floor for β = 32, high the
// ceiling for β = 1, clamped to [0, n_rot − 1].
YarnRamp yarn_ramp_in_double(int64_t n_rot, int64_t orig_ctx, double base) {
  const auto pair = [&](double beta) {
    return static_cast<double>(n_rot) *
           std::log(static_cast<double>(orig_ctx) / (2.0 * std::numbers::pi * beta)) /
           (2.0 * std::log(base));
  };
  return {static_cast<float>(std::max(0.0, std::floor(pair(32.0)))),
          static_cast<float>(std::min(static_cast<double>(n_rot - 1), std::ceil(pair(1.0))))};
}

TEST(YarnCorrDimsTest, MatchesTheFormula) {
  // Qwen3's YaRN (factor 4 over 32768, base 1e6, head 128): the ramp runs over pairs 23..40.
  const YarnRamp qwen3 = yarn_corr_dims(128, 32768, 1e6f, 32.0f, 1.0f);
  EXPECT_EQ(qwen3.low, 23.0f);
  EXPECT_EQ(qwen3.high, 40.0f);
  // A short original context: low clamps at 0.
  const YarnRamp tiny = yarn_corr_dims(64, 64, 10000.0f, 32.0f, 1.0f);
  EXPECT_EQ(tiny.low, 0.0f);
  EXPECT_EQ(tiny.high, 9.0f);
  for (int64_t n_rot : {8, 64, 128}) {
    for (int64_t ctx : {16, 64, 4096, 8192, 32768, 131072}) {
      for (float base : {100.0f, 10000.0f, 500000.0f, 1e6f}) {
        const YarnRamp got = yarn_corr_dims(n_rot, ctx, base, 32.0f, 1.0f);
        const YarnRamp want = yarn_ramp_in_double(n_rot, ctx, base);
        EXPECT_EQ(got.low, want.low) << n_rot << " " << ctx << " " << base;
        EXPECT_EQ(got.high, want.high) << n_rot << " " << ctx << " " << base;
      }
    }
  }
  // A huge original context: high clamps at n_rot − 1.
  EXPECT_EQ(yarn_corr_dims(16, 1 << 24, 100.0f, 32.0f, 1.0f).high, 15.0f);
}

// YaRN RoPE as the paper and llama.cpp define it, on the same inputs, in double: pair i's
// unscaled angle θx = p·base^(-2i/n_rot), interpolated θi = θx·freq_scale, mixed
// θ = θi·(1 − m) + θx·m with m = ext·(1 − clamp((i − low)/(high − low), 0, 1)), scaled by mscale.
std::vector<double> yarn_rope_in_double(const std::vector<float>& x, int32_t pos, int64_t n_heads,
                                        int64_t head_dim, int64_t n_rot, bool neox, double base,
                                        double freq_scale, double low, double high, double mscale) {
  std::vector<double> out(x.begin(), x.end());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const double extrap = pos * std::pow(base, -2.0 * static_cast<double>(i) / n_rot);
      const double m =
          1.0 - std::clamp((static_cast<double>(i) - low) / std::max(0.001, high - low), 0.0, 1.0);
      const double theta = extrap * freq_scale * (1.0 - m) + extrap * m;
      const size_t a = static_cast<size_t>(h * head_dim + (neox ? i : 2 * i));
      const size_t b = static_cast<size_t>(h * head_dim + (neox ? i + n_rot / 2 : 2 * i + 1));
      out[a] = mscale * (x[a] * std::cos(theta) - x[b] * std::sin(theta));
      out[b] = mscale * (x[a] * std::sin(theta) + x[b] * std::cos(theta));
    }
  }
  return out;
}

// Every tier's RoPE with YaRN: equal to the scalar table's, and to the double-precision formula
// within f32's angle error (about |θ|·1e-6: the angles are built by repeated f32 products).
TEST_F(OpsTest, RopeYarnMatchesDoublePrecisionFormula) {
  const int64_t head_dim = 80, n_heads = 3, n_rot = 64;  // partial rotation: dims 64..79 stay
  const std::vector<int32_t> pos = {0, 1, 17, 63, 64, 65, 200, 1000, 4095};
  const auto n = static_cast<int64_t>(pos.size());
  for (bool neox : {false, true}) {
    RopeParams p;
    p.n_rot = n_rot;
    p.neox = neox;
    p.freq_base = 10000.0f;
    p.freq_scale = 0.25f;
    p.ext_factor = 1.0f;
    const YarnRamp ramp = yarn_corr_dims(n_rot, 64, p.freq_base, 32.0f, 1.0f);
    p.yarn_low = ramp.low;
    p.yarn_high = ramp.high;
    p.mscale = 1.0f + 0.1f * std::log(4.0f);
    const std::vector<float> x0 = testing::random_floats(rng_, n * n_heads * head_dim, 1.0f);
    std::vector<float> ref = x0;
    scalar_.rope(p, pos.data(), n, n_heads, head_dim, n_heads * head_dim, ref.data());
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<float> row(x0.begin() + t * n_heads * head_dim,
                                   x0.begin() + (t + 1) * n_heads * head_dim);
      const std::vector<double> want =
          yarn_rope_in_double(row, pos[static_cast<size_t>(t)], n_heads, head_dim, n_rot, neox, 1e4,
                              0.25, ramp.low, ramp.high, 1.0 + 0.1 * std::log(4.0));
      const double tol = 1e-5 + 3e-6 * pos[static_cast<size_t>(t)];
      for (size_t d = 0; d < want.size(); ++d) {
        ASSERT_NEAR(ref[static_cast<size_t>(t * n_heads * head_dim) + d], want[d], tol)
            << "neox " << neox << " pos " << pos[static_cast<size_t>(t)] << " dim " << d;
      }
    }
    for (const KernelTable* t : testing::runnable_tables(cpu_)) {
      Ops ops(t->isa, &pool_, ops_features_for(*t, cpu_));
      std::vector<float> got = x0;
      ops.rope(p, pos.data(), n, n_heads, head_dim, n_heads * head_dim, got.data());
      EXPECT_EQ(got, ref) << t->name;
    }
  }
}

// YaRN's two ends exactly: pairs up to the ramp's start turn as unscaled RoPE, pairs from its end
// as linearly interpolated RoPE (bit for bit, times mscale); pairs inside turn in between.
TEST_F(OpsTest, RopeYarnEndsAreUnscaledAndInterpolatedRope) {
  const int64_t n_rot = 64;
  RopeParams yarn;
  yarn.n_rot = n_rot;
  yarn.freq_scale = 0.25f;
  yarn.ext_factor = 1.0f;
  yarn.yarn_low = 3.0f;
  yarn.yarn_high = 20.0f;
  yarn.mscale = 1.25f;
  RopeParams plain = yarn;
  plain.freq_scale = 1.0f;
  plain.ext_factor = 0.0f;
  RopeParams linear = yarn;
  linear.ext_factor = 0.0f;
  for (int32_t pos : {5, 300, 5000}) {
    std::vector<float> cy(n_rot / 2), sy(n_rot / 2), cp(n_rot / 2), sp(n_rot / 2), cl(n_rot / 2),
        sl(n_rot / 2);
    rope_angles(yarn, pos, cy.data(), sy.data());
    rope_angles(plain, pos, cp.data(), sp.data());
    rope_angles(linear, pos, cl.data(), sl.data());
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const auto u = static_cast<size_t>(i);
      if (i <= 3) {
        EXPECT_EQ(cy[u], cp[u]) << pos << " " << i;
        EXPECT_EQ(sy[u], sp[u]) << pos << " " << i;
      } else if (i >= 20) {
        EXPECT_EQ(cy[u], cl[u]) << pos << " " << i;
        EXPECT_EQ(sy[u], sl[u]) << pos << " " << i;
      }
      EXPECT_NEAR(cy[u] * cy[u] + sy[u] * sy[u], 1.25 * 1.25, 1e-5);
    }
  }
  // ext_factor 0: YaRN's ramp is off and RoPE is the linear one.
  RopeParams off = yarn;
  off.ext_factor = 0.0f;
  off.mscale = 1.0f;
  linear.mscale = 1.0f;
  std::vector<float> c1(n_rot / 2), s1(n_rot / 2), c2(n_rot / 2), s2(n_rot / 2);
  rope_angles(off, 777, c1.data(), s1.data());
  rope_angles(linear, 777, c2.data(), s2.data());
  EXPECT_EQ(c1, c2);
  EXPECT_EQ(s1, s2);
}

}  // namespace
}  // namespace keel::kernels
