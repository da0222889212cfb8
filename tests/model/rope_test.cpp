// RoPE as the model applies it, checked against the direct formula. A one-layer model whose
// attn_norm is all ones and whose attn_k is the identity stores rope(rmsnorm(embedding)) in the
// KV cache, so the rotation of every position can be read back and compared — for adjacent-pair
// (llama) and NeoX (qwen2) ordering, linear scaling, llama3 frequency factors, partial rotation.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

constexpr int64_t kEmbd = 32, kHeadDim = 16, kPositions = 300;

struct RopeCase {
  const char* name;
  const char* arch;
  int64_t n_rot;
  float base;
  float linear_factor;  // 0: none
  std::vector<float> freq_factors;
};
void PrintTo(const RopeCase& c, std::ostream* os) { *os << c.name; }

TinySpec rope_spec(const RopeCase& c) {
  TinySpec s;
  s.arch = c.arch;
  s.zero_bias = true;
  s.n_layer = 1;
  s.n_embd = kEmbd;
  s.n_head = s.n_head_kv = 2;
  s.head_dim = kHeadDim;
  s.n_ctx = 512;
  s.n_rot = c.n_rot;
  s.freq_base = c.base;
  s.rope_scaling_factor = c.linear_factor;
  s.rope_freqs = c.freq_factors;
  std::vector<float> identity(static_cast<size_t>(kEmbd * kEmbd), 0.0f);
  for (int64_t i = 0; i < kEmbd; ++i) identity[static_cast<size_t>(i * kEmbd + i)] = 1.0f;
  s.value_override = {{"blk.0.attn_norm.weight", std::vector<float>(kEmbd, 1.0f)},
                      {"blk.0.attn_k.weight", identity}};
  return s;
}

// The expected K row of `token` at `pos`: rmsnorm of its embedding, each head rotated.
std::vector<double> expected_k(const TinyModel& m, const RopeCase& c, int32_t token, int64_t pos) {
  const std::vector<float>& e = m.tensors.at("token_embd.weight");
  std::vector<double> x(e.begin() + token * kEmbd, e.begin() + (token + 1) * kEmbd);
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / kEmbd + m.spec.rms_eps);
  for (double& v : x) v *= scale;
  const bool neox = std::string(c.arch) != "llama";
  const double freq_scale = c.linear_factor != 0 ? 1.0 / c.linear_factor : 1.0;
  for (int64_t h = 0; h < kEmbd / kHeadDim; ++h) {
    std::vector<double> head(x.begin() + h * kHeadDim, x.begin() + (h + 1) * kHeadDim);
    reference_rope(head, pos, c.n_rot, c.base, freq_scale, neox, c.freq_factors);
    std::copy(head.begin(), head.end(), x.begin() + h * kHeadDim);
  }
  return x;
}

class RopeTest : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeTest, CachedKeysAreRotatedByTheFormula) {
  const RopeCase& c = GetParam();
  const TinyModel m = write_tiny_model(rope_spec(c));
  Runner r(m.path, {}, 2, /*max_batch=*/kPositions);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Batch b = r.batch();
  for (int32_t p = 0; p < kPositions; ++p) b.add((p * 7 + 3) % 40, p, 0, p + 1 == kPositions);
  ASSERT_TRUE(r.forward(b, nullptr).ok());
  double worst = 0.0, moved = 0.0;
  for (int32_t p = 0; p < kPositions; ++p) {
    const std::vector<double> want = expected_k(m, c, b.tokens[static_cast<size_t>(p)], p);
    const std::vector<double> unrotated = expected_k(m, c, b.tokens[static_cast<size_t>(p)], 0);
    const std::vector<float> got = r.k_row(0, 0, p);
    for (size_t d = 0; d < want.size(); ++d) {
      worst = std::max(worst, std::fabs(got[d] - want[d]));
      moved = std::max(moved, std::fabs(want[d] - unrotated[d]));
      // Dimensions past n_rot are never rotated.
      if (static_cast<int64_t>(d) % kHeadDim >= c.n_rot) {
        EXPECT_EQ(want[d], unrotated[d]);
      }
    }
  }
  EXPECT_LE(worst, 5e-4) << c.name;
  EXPECT_GT(moved, 0.5) << "rotation too small for the check to mean anything";
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RopeTest,
    ::testing::Values(
        RopeCase{"normal", "llama", kHeadDim, 10000.0f, 0, {}},
        RopeCase{"neox", "qwen2", kHeadDim, 10000.0f, 0, {}},
        RopeCase{"normal_linear4", "llama", kHeadDim, 10000.0f, 4.0f, {}},
        RopeCase{"neox_linear2", "qwen2", kHeadDim, 10000.0f, 2.0f, {}},
        RopeCase{"normal_freq_factors",
                 "llama",
                 kHeadDim,
                 500000.0f,
                 0,
                 {1.0f, 1.0f, 2.0f, 4.0f, 8.0f, 8.0f, 16.0f, 32.0f}},
        RopeCase{"neox_freq_factors_partial", "qwen2", 8, 1e6f, 0, {1.0f, 3.0f, 5.0f, 9.0f}},
        RopeCase{"normal_partial", "llama", 6, 10000.0f, 0, {}}),
    [](const auto& info) { return std::string(info.param.name); });

// The two orderings really differ, so a model wired to the wrong one fails the tests above.
TEST(RopeFormulaTest, OrderingsDiffer) {
  std::vector<double> a(16), b;
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(static_cast<double>(i) + 1.0);
  b = a;
  reference_rope(a, 5, 16, 10000.0, 1.0, false, {});
  reference_rope(b, 5, 16, 10000.0, 1.0, true, {});
  double diff = 0.0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  EXPECT_GT(diff, 0.1);
}

}  // namespace
}  // namespace keel::model::testing
