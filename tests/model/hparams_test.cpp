// Hyper-parameter parsing: defaults, RoPE scaling, and a precise Status for every unknown,
// missing, mistyped or inconsistent value (on small synthetic GGUFs).
#include "model/hparams.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/model.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

using ::testing::HasSubstr;

Status load_error(const TinyModel& m) {
  auto r = Model::open(m.path);
  if (r.ok()) return Status::internal("unexpectedly loaded " + m.path);
  return r.error();
}

Result<HParams> load_hparams(const TinyModel& m) {
  auto r = Model::open(m.path);
  if (!r.ok()) return r.error();
  return (*r)->hparams();
}

TEST(HParamsTest, ReadsLlamaKeys) {
  TinySpec s;
  s.n_ctx = 96;
  s.rms_eps = 1e-6f;
  s.freq_base = 5e5f;
  const TinyModel m = write_tiny_model(s);
  auto hp = load_hparams(m);
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->arch, Arch::kLlama);
  EXPECT_EQ(hp->n_vocab, 40);
  EXPECT_EQ(hp->n_embd, 32);
  EXPECT_EQ(hp->n_layer, 2);
  EXPECT_EQ(hp->n_head, 4);
  EXPECT_EQ(hp->n_head_kv, 2);
  EXPECT_EQ(hp->head_dim, 8);
  EXPECT_EQ(hp->n_ff, 48);
  EXPECT_EQ(hp->n_ctx_train, 96);
  EXPECT_FLOAT_EQ(hp->rms_eps, 1e-6f);
  EXPECT_EQ(hp->rope.n_rot, 8);
  EXPECT_FLOAT_EQ(hp->rope.freq_base, 5e5f);
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 1.0f);
  EXPECT_FALSE(hp->rope.neox);
  EXPECT_EQ(hp->rope.freq_factors, nullptr);
  EXPECT_FALSE(hp->qkv_bias);
  EXPECT_FALSE(hp->qk_norm);
}

TEST(HParamsTest, ArchitectureSelectsRopeOrderingAndExtras) {
  TinySpec s;
  s.arch = "qwen2";
  auto q2 = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(q2.ok()) << q2.error().to_string();
  EXPECT_EQ(q2->arch, Arch::kQwen2);
  EXPECT_TRUE(q2->rope.neox);
  EXPECT_TRUE(q2->qkv_bias);
  EXPECT_FALSE(q2->qk_norm);
  s.arch = "qwen3";
  s.head_dim = 16;  // ≠ n_embd / n_head = 8: key_length is written
  auto q3 = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(q3.ok()) << q3.error().to_string();
  EXPECT_EQ(q3->arch, Arch::kQwen3);
  EXPECT_TRUE(q3->rope.neox);
  EXPECT_TRUE(q3->qk_norm);
  EXPECT_FALSE(q3->qkv_bias);
  EXPECT_EQ(q3->head_dim, 16);
  EXPECT_EQ(q3->q_dim(), 64);
  EXPECT_EQ(q3->kv_dim(), 32);
  EXPECT_EQ(q3->rope.n_rot, 16);
}

TEST(HParamsTest, OptionalKeysTakeDefaults) {
  TinySpec s;
  s.n_head_kv = s.n_head;
  s.skip_keys = {"llama.attention.head_count_kv", "llama.rope.freq_base"};
  auto hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->n_head_kv, hp->n_head);
  EXPECT_FLOAT_EQ(hp->rope.freq_base, 10000.0f);
}

TEST(HParamsTest, LinearRopeScaling) {
  TinySpec s;
  s.rope_scaling_type = "linear";
  s.rope_scaling_factor = 4.0f;
  auto hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 0.25f);
  s.rope_scaling_type = "none";  // "none" ignores the factor
  hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 1.0f);
  s.rope_scaling_type = "";  // no type: a factor means linear scaling (as llama.cpp reads it)
  s.rope_scaling_factor = 2.0f;
  hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 0.5f);
}

// YaRN as llama.cpp sets it up: ext_factor 1, the ramp over the original context (default the
// training context), freq_scale 1 / factor and cos/sin scaled by 1 + 0.1·ln(factor) times
// rope.scaling.attn_factor.
TEST(HParamsTest, YarnRopeScaling) {
  TinySpec s;
  s.arch = "qwen3";
  s.head_dim = 16;
  s.n_ctx = 4096;
  s.freq_base = 1e4f;
  s.rope_scaling_type = "yarn";
  s.rope_scaling_factor = 4.0f;
  s.rope_orig_ctx = 1024;
  auto hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->n_ctx_orig_yarn, 1024);
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 0.25f);
  EXPECT_EQ(hp->rope.ext_factor, 1.0f);
  // n_rot 16 over 1024 positions, base 1e4: d(32) = 16·ln(1024/(64π))/(2 ln 1e4) = 1.41,
  // d(1) = 16·ln(1024/(2π))/(2 ln 1e4) = 4.42.
  EXPECT_EQ(hp->rope.yarn_low, 1.0f);
  EXPECT_EQ(hp->rope.yarn_high, 5.0f);
  EXPECT_NEAR(hp->rope.mscale, 1.0 + 0.1 * std::log(4.0), 1e-6);
  s.rope_orig_ctx = 0;  // default: the training context
  s.rope_attn_factor = 0.5f;
  hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->n_ctx_orig_yarn, 4096);
  EXPECT_EQ(hp->rope.yarn_high, 6.0f);  // d(1) = 5.63
  EXPECT_NEAR(hp->rope.mscale, 0.5 * (1.0 + 0.1 * std::log(4.0)), 1e-6);
  s.rope_scaling_factor = 0.5f;  // a factor below 1: no magnitude change (llama.cpp's get_mscale)
  s.rope_attn_factor = 0;
  hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_FLOAT_EQ(hp->rope.freq_scale, 2.0f);
  EXPECT_NEAR(hp->rope.mscale, 1.0, 1e-6);
}

TEST(HParamsTest, AttnFactorScalesEveryRopeType) {
  TinySpec s;
  s.rope_attn_factor = 0.75f;
  auto hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->rope.ext_factor, 0.0f);
  EXPECT_EQ(hp->rope.mscale, 0.75f);
  EXPECT_EQ(hp->n_ctx_orig_yarn, hp->n_ctx_train);
}

// Keys llama.cpp does not read for these architectures: their defaults are accepted, any other
// value is refused by name (keel would otherwise compute something llama.cpp does not).
TEST(HParamsTest, YarnKeysLlamaCppIgnoresMustHoldItsDefaults) {
  TinySpec s;
  s.rope_scaling_type = "yarn";
  s.rope_scaling_factor = 4.0f;
  s.extra_keys = {{"llama.rope.scaling.yarn_beta_fast", 32.0f},
                  {"llama.rope.scaling.yarn_beta_slow", 1.0f},
                  {"llama.rope.scaling.yarn_ext_factor", 1.0f},
                  {"llama.rope.scaling.yarn_attn_factor", 1.0f},
                  {"llama.rope.scaling.yarn_log_multiplier", 0.0f}};
  auto hp = load_hparams(write_tiny_model(s));
  ASSERT_TRUE(hp.ok()) << hp.error().to_string();
  EXPECT_EQ(hp->rope.ext_factor, 1.0f);
  s.extra_keys = {{"llama.rope.scaling.yarn_beta_fast", 16.0f}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), m.path +
                              ": llama.rope.scaling.yarn_beta_fast = 16 is not supported "
                              "(llama.cpp uses 32): llama.cpp does not read this key for llama, "
                              "and keel computes RoPE as llama.cpp does");
  s.rope_scaling_type = "linear";  // without YaRN, llama.cpp's ext_factor is 0
  s.extra_keys = {{"llama.rope.scaling.yarn_ext_factor", 1.0f}};
  EXPECT_EQ(load_error(write_tiny_model(s)).code(), StatusCode::kUnsupported);
}

TEST(HParamsTest, UnknownRopeScalingIsUnsupported) {
  TinySpec s;
  s.rope_scaling_type = "longrope";
  s.rope_scaling_factor = 4.0f;
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), m.path +
                              ": llama.rope.scaling.type = 'longrope' is not supported (keel "
                              "supports none, linear, yarn, and llama3-style rope_freqs.weight)");
}

TEST(HParamsTest, UnknownArchitectureIsNamed) {
  TinySpec s;
  s.arch = "gpt2";
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), m.path +
                              ": architecture 'gpt2' (general.architecture) is not supported; "
                              "keel supports llama, qwen2, qwen3, qwen2moe and qwen3moe");
}

// Mixture-of-experts files keel does not run: one line naming the architecture or key.
TEST(HParamsTest, UnsupportedMixtureOfExpertsIsOneLine) {
  TinySpec s;
  s.arch = "deepseek2";
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_EQ(st.message(), m.path +
                              ": mixture-of-experts architecture 'deepseek2' "
                              "(general.architecture) is not supported; keel runs MoE models of "
                              "llama (Mixtral), qwen2moe and qwen3moe");
  TinySpec q;
  q.arch = "qwen2";
  q.extra_keys = {{"qwen2.expert_count", uint32_t{8}}};
  const Status st2 = load_error(write_tiny_model(q));
  EXPECT_EQ(st2.code(), StatusCode::kUnsupported);
  EXPECT_THAT(st2.message(), HasSubstr("qwen2.expert_count = 8"));
  EXPECT_EQ(st2.message().find('\n'), std::string::npos);
}

class MissingKeyTest : public ::testing::TestWithParam<const char*> {};

TEST_P(MissingKeyTest, IsNotFoundNamingTheKey) {
  TinySpec s;
  s.skip_keys = {GetParam()};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_EQ(st.message(), m.path + ": metadata key '" + GetParam() + "' is missing");
}

INSTANTIATE_TEST_SUITE_P(RequiredKeys, MissingKeyTest,
                         ::testing::Values("general.architecture", "llama.context_length",
                                           "llama.embedding_length", "llama.block_count",
                                           "llama.feed_forward_length",
                                           "llama.attention.head_count",
                                           "llama.attention.layer_norm_rms_epsilon"));

TEST(HParamsTest, MistypedKeyIsNamed) {
  TinySpec s;
  s.extra_keys = {{"llama.block_count", "two"}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            m.path + ": metadata key 'llama.block_count' has type string, expected an integer");
}

TEST(HParamsTest, MistypedOptionalKeyIsAnErrorNotADefault) {
  TinySpec s;
  s.extra_keys = {{"llama.rope.freq_base", "high"}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("'llama.rope.freq_base' has type string"));
}

TEST(HParamsTest, OutOfRangeValuesAreNamed) {
  TinySpec s;
  s.extra_keys = {{"llama.block_count", uint32_t{0}}};
  TinyModel m = write_tiny_model(s);
  Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            m.path + ": metadata key 'llama.block_count' = 0 is out of range [1, 16384]");
  s.extra_keys = {{"llama.attention.layer_norm_rms_epsilon", -1.0f}};
  m = write_tiny_model(s);
  st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(),
              HasSubstr("'llama.attention.layer_norm_rms_epsilon' must be a positive number"));
}

TEST(HParamsTest, HeadCountNotDividingIsInconsistent) {
  TinySpec s;
  s.extra_keys = {{"llama.attention.head_count_kv", uint32_t{3}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), m.path +
                              ": llama.attention.head_count (4) is not a multiple of "
                              "llama.attention.head_count_kv (3)");
}

TEST(HParamsTest, EmbeddingNotDividingWithoutKeyLengthIsInconsistent) {
  TinySpec s;
  s.extra_keys = {{"llama.attention.head_count", uint32_t{5}},
                  {"llama.attention.head_count_kv", uint32_t{5}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), m.path +
                              ": llama.embedding_length (32) is not a multiple of "
                              "llama.attention.head_count (5) and llama.attention.key_length is "
                              "absent");
}

TEST(HParamsTest, RopeDimensionBeyondHeadIsInconsistent) {
  TinySpec s;
  s.extra_keys = {{"llama.rope.dimension_count", uint32_t{10}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), m.path +
                              ": llama.rope.dimension_count (10) must be even and at most the "
                              "head dimension (8)");
}

TEST(HParamsTest, DifferentValueLengthIsUnsupported) {
  TinySpec s;
  s.extra_keys = {{"llama.attention.value_length", uint32_t{16}}};
  const TinyModel m = write_tiny_model(s);
  const Status st = load_error(m);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_THAT(st.message(), HasSubstr("llama.attention.value_length (16) differs"));
}

}  // namespace
}  // namespace keel::model::testing
