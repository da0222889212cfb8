// RoPE as the model applies it, checked against the direct formula. A one-layer model whose
// attn_norm is all ones and whose attn_k is the identity stores rope(rmsnorm(embedding)) in the
// KV cache, so the rotation of every position can be read back and compared — for adjacent-pair
// (llama) and NeoX (qwen2) ordering, linear scaling, YaRN, llama3 frequency factors, partial
// rotation. A YaRN key moved to another position (kv_relocate) equals the key computed there.
#include <gtest/gtest.h>

#include <cmath>

#include "model/kv_relocate.h"
#include "model/random_model.h"
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
  float linear_factor;  // 0: none (with yarn: YaRN's factor)
  std::vector<float> freq_factors;
  int64_t yarn_orig_ctx = 0;  // > 0: YaRN over this original context
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
  if (c.yarn_orig_ctx > 0) {
    s.rope_scaling_type = "yarn";
    s.rope_orig_ctx = c.yarn_orig_ctx;
  }
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
  YarnReference yarn;
  if (c.yarn_orig_ctx > 0)
    yarn = yarn_reference(c.n_rot, c.yarn_orig_ctx, c.base, c.linear_factor, 1.0);
  for (int64_t h = 0; h < kEmbd / kHeadDim; ++h) {
    std::vector<double> head(x.begin() + h * kHeadDim, x.begin() + (h + 1) * kHeadDim);
    reference_rope(head, pos, c.n_rot, c.base, freq_scale, neox, c.freq_factors, yarn);
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
      // Dimensions past n_rot are never rotated (nor scaled).
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
        RopeCase{"normal_partial", "llama", 6, 10000.0f, 0, {}},
        // YaRN ×4 over an original context of 64 (positions run to 300): the ramp over pairs
        // 0..3 (base 500); NeoX with partial rotation; with llama3 factors as well.
        RopeCase{"normal_yarn4", "llama", kHeadDim, 500.0f, 4.0f, {}, 64},
        RopeCase{"neox_yarn4_partial", "qwen2", 12, 500.0f, 4.0f, {}, 64},
        RopeCase{"normal_yarn8_freq_factors",
                 "llama",
                 kHeadDim,
                 10000.0f,
                 8.0f,
                 {1.0f, 1.0f, 2.0f, 4.0f, 8.0f, 8.0f, 16.0f, 32.0f},
                 32}),
    [](const auto& info) { return std::string(info.param.name); });

// EPIC's link step on a YaRN model: keys computed at positions 0..19 and moved by 37 (turned by
// the delta, without a second YaRN magnitude scale) equal the keys computed at 37..56.
TEST(RopeRelocationTest, MovedYarnKeysEqualKeysComputedThere) {
  const RopeCase c{"yarn", "qwen2", kHeadDim, 500.0f, 4.0f, {}, 64};
  const TinyModel m = write_tiny_model(rope_spec(c));
  Runner r(m.path, {}, 1, 64, {.n_seqs = 2});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_NE(r.model().hparams().rope.mscale, 1.0f);
  constexpr int32_t kDelta = 37, kLen = 20;
  std::vector<int32_t> tokens;
  for (int32_t p = 0; p < kLen; ++p) tokens.push_back((p * 7 + 3) % 40);
  r.feed(tokens, 0, 0);
  r.feed(tokens, 1, kDelta);
  const int32_t bs = r.block_size();
  std::vector<KvRowMove> moves;
  for (int32_t j = 0; j < kLen; ++j) {
    const int32_t p = j + kDelta;
    moves.push_back({r.table(0)[static_cast<size_t>(j / bs)], j % bs,
                     r.table(0)[static_cast<size_t>(p / bs)], p % bs, kDelta});
  }
  move_kv_rows(r.model().hparams(), r.storage(), r.ops(), moves);
  double worst = 0.0, norm = 0.0;
  for (int32_t p = kDelta; p < kDelta + kLen; ++p) {
    const std::vector<float> moved = r.k_row(0, 0, p), direct = r.k_row(0, 1, p);
    for (size_t d = 0; d < moved.size(); ++d) {
      worst = std::max(worst, std::fabs(double{moved[d]} - direct[d]));
      norm = std::max(norm, std::fabs(double{direct[d]}));
    }
  }
  EXPECT_GT(norm, 0.5);
  EXPECT_LE(worst, 3e-5 * norm);  // f32 angles: θ(j) + θ(37) vs θ(j + 37)
}

// The long-window shapes of `keel make-model` (model/random_model.h) as their config.json say.
TEST(LongContextShapesTest, Qwen3AndLlama32AsTheirConfigsSay) {
  const auto q = find_model_shape("qwen3-0.6b");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->arch, "qwen3");
  EXPECT_EQ(q->n_layer, 28);
  EXPECT_EQ(q->n_embd, 1024);
  EXPECT_EQ(q->n_head, 16);
  EXPECT_EQ(q->n_head_kv, 8);
  EXPECT_EQ(q->head_size(), 128);
  EXPECT_EQ(q->n_ff, 3072);
  EXPECT_EQ(q->n_vocab, 151936);
  EXPECT_EQ(q->n_ctx, 40960);
  EXPECT_EQ(q->rope_base, 1e6f);
  EXPECT_EQ(q->rms_eps, 1e-6f);
  EXPECT_TRUE(q->tied_output);
  EXPECT_FALSE(q->llama3_rope);
  const auto l = find_model_shape("llama-3.2-1b");
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->n_ctx, 131072);
  EXPECT_TRUE(l->llama3_rope);
  EXPECT_EQ(l->rope_base, 500000.0f);
}

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
