// Mixture-of-experts models: hyper-parameters and load errors, the forward pass against the
// double-precision reference (tiny_model.h) for each family, the grouped MoE layer against the
// naive per-token loop, a one-expert top-1 model against its dense twin, the three expert tensor
// layouts against each other, and decode touching only the chosen experts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <random>
#include <set>

#include "core/thread_pool.h"
#include "gguf/writer.h"
#include "model/expert_token_counts.h"
#include "model/lora_adapter.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "model/random_model.h"
#include "support/test_support.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<int32_t> kTokens = {1, 7, 22, 3, 39, 12, 5, 30, 18, 9, 2, 27};

TinySpec moe_spec(const std::string& arch) {
  TinySpec s;
  s.arch = arch;
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 16;
  if (arch == "qwen2moe") s.n_ff_shexp = 24;
  if (arch == "qwen3moe") s.head_dim = 16;  // q_dim 64 != n_embd 32
  if (arch == "llama") s.n_ff = 16;         // Mixtral experts are feed_forward_length wide
  return s;
}

Status load_error(const TinySpec& s) {
  auto r = Model::open(write_tiny_model(s).path);
  if (r.ok()) return Status::internal("unexpectedly loaded");
  return r.error();
}

TEST(MoeHParamsTest, ReadsEachFamily) {
  struct Want {
    const char* arch;
    Arch id;
    int64_t ff_exp, ff_shexp;
    bool norm;
  };
  for (const Want& w : {Want{"qwen3moe", Arch::kQwen3Moe, 16, 0, true},
                        Want{"qwen2moe", Arch::kQwen2Moe, 16, 24, false},
                        Want{"llama", Arch::kLlama, 16, 0, true}}) {
    auto m = Model::open(write_tiny_model(moe_spec(w.arch)).path);
    ASSERT_TRUE(m.ok()) << w.arch << ": " << m.error().to_string();
    const HParams& hp = (*m)->hparams();
    EXPECT_EQ(hp.arch, w.id);
    EXPECT_TRUE(hp.is_moe());
    EXPECT_EQ(hp.moe.n_expert, 8);
    EXPECT_EQ(hp.moe.n_expert_used, 2);
    EXPECT_EQ(hp.moe.n_ff_exp, w.ff_exp) << w.arch;
    EXPECT_EQ(hp.moe.n_ff_shexp, w.ff_shexp) << w.arch;
    EXPECT_EQ(hp.moe.norm_weights, w.norm) << w.arch;
    EXPECT_EQ(hp.qk_norm, w.id == Arch::kQwen3Moe);
    EXPECT_EQ(hp.qkv_bias, w.id == Arch::kQwen2Moe);
    EXPECT_EQ((*m)->weights().layers[1].moe.gate.size(), 8u);
    EXPECT_EQ((*m)->weights().layers[1].moe.has_shared(), w.ff_shexp > 0);
  }
}

TEST(MoeHParamsTest, MalformedFilesAreOneLineErrors) {
  TinySpec s = moe_spec("qwen3moe");
  s.extra_keys = {{"qwen3moe.expert_used_count", uint32_t{9}}};
  Status st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("qwen3moe.expert_used_count (9) exceeds "
                                      "qwen3moe.expert_count (8)"));

  s = moe_spec("qwen3moe");
  s.skip_keys = {"qwen3moe.expert_count"};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("qwen3moe.expert_count"));

  s = moe_spec("llama");
  s.skip_keys = {"llama.expert_used_count"};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("llama.expert_used_count"));

  s = moe_spec("qwen2moe");
  s.shape_override = {{"blk.1.ffn_up_exps.weight", {32, 16, 7}}};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("tensor 'blk.1.ffn_up_exps.weight' has shape [32, 16, 7], "
                                      "expected [32, 16, 8]"));

  s = moe_spec("qwen2moe");
  s.skip_tensors = {"blk.0.ffn_gate_inp_shexp.weight"};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_THAT(st.message(), HasSubstr("'blk.0.ffn_gate_inp_shexp.weight' is missing"));

  for (const Status& e : {st}) EXPECT_EQ(e.message().find('\n'), std::string::npos);

  s = moe_spec("qwen3moe");
  s.extra_keys = {{"qwen3moe.expert_gating_func", uint32_t{2}}};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_THAT(st.message(), HasSubstr("qwen3moe.expert_gating_func = 2 is not supported"));
  s = moe_spec("llama");
  s.extra_keys = {{"llama.expert_weights_scale", 2.5f}};
  st = load_error(s);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_THAT(st.message(), HasSubstr("llama.expert_weights_scale"));
  s.extra_keys = {{"llama.expert_weights_scale", 1.0f}, {"llama.expert_gating_func", uint32_t{1}}};
  EXPECT_TRUE(Model::open(write_tiny_model(s).path).ok());
}

// Routing by hand: softmax over all experts, the k largest (ties: lower index first), weights
// renormalised only when norm_weights.
TEST(MoeRoutingTest, TopKOfTheSoftmaxWithAndWithoutRenormalisation) {
  MoeParams p;
  p.n_expert = 4;
  p.n_expert_used = 2;
  const float logits[] = {0.0f,  2.0f,  1.0f, 2.0f,  // tie between experts 1 and 3
                          -1.0f, -3.0f, 0.5f, 0.25f};
  int32_t experts[4];
  float weights[4];
  route_tokens(p, logits, 2, experts, weights);
  const double z0 = 1 + 2 * std::exp(2.0) + std::exp(1.0);
  const double z1 = std::exp(-1.0) + std::exp(-3.0) + std::exp(0.5) + std::exp(0.25);
  EXPECT_EQ(std::vector<int32_t>(experts, experts + 4), (std::vector<int32_t>{1, 3, 2, 3}));
  EXPECT_NEAR(weights[0], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(weights[1], std::exp(2.0) / z0, 1e-6);
  EXPECT_NEAR(weights[2], std::exp(0.5) / z1, 1e-6);
  EXPECT_NEAR(weights[3], std::exp(0.25) / z1, 1e-6);
  p.norm_weights = true;
  route_tokens(p, logits, 2, experts, weights);
  EXPECT_NEAR(weights[0], 0.5, 1e-6);
  EXPECT_NEAR(weights[2], std::exp(0.5) / (std::exp(0.5) + std::exp(0.25)), 1e-6);
  EXPECT_NEAR(weights[2] + weights[3], 1.0, 1e-6);
}

// An adapter on an MoE model's FFN is refused (one line, Unsupported); one on attention loads.
TEST(MoeLoraTest, FfnTargetsAreRefusedAttentionTargetsLoad) {
  const TinyModel m = write_tiny_model(moe_spec("qwen3moe"));  // n_embd 32, q_dim 64, n_ff 48
  Runner r(m.path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string dir = keel::testing::make_temp_dir("moe-lora");
  auto write = [&](const std::string& name, const std::string& base, int64_t in, int64_t out) {
    gguf::GgufWriter w;
    w.set("general.architecture", std::string("qwen3moe"));
    w.set("general.type", std::string("adapter"));
    w.set("adapter.type", std::string("lora"));
    w.set("adapter.lora.alpha", 8.0f);
    std::vector<std::byte> a(static_cast<size_t>(in * 4 * 4)), b(static_cast<size_t>(4 * out * 4));
    EXPECT_TRUE(w.add_tensor(base + ".lora_a", DType::kF32, {in, 4}, a).ok());
    EXPECT_TRUE(w.add_tensor(base + ".lora_b", DType::kF32, {4, out}, b).ok());
    EXPECT_TRUE(w.write(dir + "/" + name).ok());
    return dir + "/" + name;
  };
  auto ffn = LoraAdapter::open(write("ffn.gguf", "blk.0.ffn_gate.weight", 32, 48), r.model());
  ASSERT_FALSE(ffn.ok());
  EXPECT_EQ(ffn.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(ffn.status().message(), HasSubstr("targets the FFN of a mixture-of-experts model"));
  auto attn = LoraAdapter::open(write("attn.gguf", "blk.0.attn_q.weight", 32, 64), r.model());
  EXPECT_TRUE(attn.ok()) << attn.status().to_string();
}

class MoeReferenceTest : public ::testing::TestWithParam<const char*> {};

// Prefill (all tokens in one batch: several tokens per expert) and decode (one token per step)
// both match the textbook formulas computed in double.
TEST_P(MoeReferenceTest, ForwardMatchesDoublePrecisionReference) {
  const TinyModel m = write_tiny_model(moe_spec(GetParam()));
  Runner r(m.path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<float> got = r.feed(kTokens, 0);
  const auto ref = reference_logits(m, kTokens);
  ASSERT_EQ(got.size(), kTokens.size() * 40);
  double worst = 0.0, spread = 0.0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    worst = std::max(worst, max_abs_diff(got.data() + t * 40, ref[t].data(), 40));
    for (float v : ref[t]) spread = std::max(spread, std::fabs(double{v}));
  }
  EXPECT_LE(worst, 1e-4) << GetParam();
  EXPECT_GT(spread, 0.5) << "logits too small for the comparison to mean anything";
  const std::vector<float> step = r.feed(kTokens, 1, 0, /*one_by_one=*/true);
  EXPECT_LE(max_abs_diff(step, got), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Families, MoeReferenceTest,
                         ::testing::Values("qwen3moe", "qwen2moe", "llama"));

// A one-expert, top-1 model computes exactly what its dense twin computes.
TEST(MoeForwardTest, SingleExpertTopOneEqualsDense) {
  TinySpec dense;
  const TinyModel d = write_tiny_model(dense);
  TinySpec one = dense;
  one.n_expert = 1;
  one.n_expert_used = 1;
  for (int il = 0; il < 2; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    for (const char* k : {"ffn_gate", "ffn_up", "ffn_down"}) {
      one.value_override[p + k + "_exps.weight"] = d.tensors.at(p + k + ".weight");
    }
  }
  Runner rd(d.path), rm(write_tiny_model(one).path);
  ASSERT_TRUE(rd.ok() && rm.ok()) << rm.status().to_string();
  ASSERT_TRUE(rm.model().hparams().is_moe());
  EXPECT_EQ(rm.feed(kTokens, 0), rd.feed(kTokens, 0));
  EXPECT_EQ(rm.feed(kTokens, 1, 0, true), rd.feed(kTokens, 1, 0, true));
}

// The routing is counted per layer and expert: each token once per chosen expert in every layer,
// whether the prompt runs as one batch or token by token; the load summary reads the counts.
TEST(MoeForwardTest, RoutingIsCountedPerLayerAndExpert) {
  Runner r(write_tiny_model(moe_spec("qwen3moe")).path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HParams& hp = r.model().hparams();
  ExpertTokenCounts counts(hp.n_layer, hp.moe.n_expert);
  r.context().count_experts(&counts);
  const auto per_layer = [&](const std::vector<int64_t>& c, int64_t l) {
    int64_t sum = 0;
    for (int64_t e = 0; e < hp.moe.n_expert; ++e)
      sum += c[static_cast<size_t>(l * hp.moe.n_expert + e)];
    return sum;
  };
  (void)r.feed(kTokens, 0);
  const std::vector<int64_t> batched = counts.snapshot();
  const auto n = static_cast<int64_t>(kTokens.size());
  for (int64_t l = 0; l < hp.n_layer; ++l) EXPECT_EQ(per_layer(batched, l), n * 2) << l;
  (void)r.feed(kTokens, 1, 0, /*one_by_one=*/true);
  const std::vector<int64_t> both = counts.snapshot();
  for (int64_t l = 0; l < hp.n_layer; ++l) EXPECT_EQ(per_layer(both, l), n * 4) << l;
  const ExpertLoad load = summarize_expert_load(both, hp.n_layer, hp.moe.n_expert);
  EXPECT_EQ(load.routed, n * 4 * hp.n_layer);
  EXPECT_GE(load.worst_max_over_mean, load.mean_max_over_mean);
  EXPECT_GE(load.mean_max_over_mean, 1.0);
  r.context().count_experts(nullptr);  // no longer counted
  (void)r.feed(kTokens, 0);
  EXPECT_EQ(counts.snapshot(), both);
}

TEST(ExpertTokenCountsTest, OutOfRangeIsIgnoredAndTheSummaryReadsEachLayer) {
  ExpertTokenCounts counts(3, 4);
  counts.add(0, std::vector<int32_t>{0, 0, 0, 0, 9, -1});  // 9 and -1: no such expert
  counts.add(1, std::vector<int32_t>{0, 1, 2, 3});
  counts.add(3, std::vector<int32_t>{0});  // no such layer
  const std::vector<int64_t> c = counts.snapshot();
  EXPECT_EQ(c, (std::vector<int64_t>{4, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0}));
  const ExpertLoad load = summarize_expert_load(c, 3, 4);
  EXPECT_EQ(load.routed, 8);
  EXPECT_DOUBLE_EQ(load.worst_max_over_mean, 4.0);  // layer 0: all on one expert
  EXPECT_EQ(load.worst_layer, 0);
  EXPECT_DOUBLE_EQ(load.mean_max_over_mean, 2.5);  // (4 + 1) / 2; layer 2 routed nothing
  EXPECT_EQ(load.idle_experts, 3);
  EXPECT_EQ(summarize_expert_load({}, 3, 4).worst_layer, -1);
}

std::string write_shape(const std::string& shape, DType type, ExpertLayout layout) {
  RandomModelSpec spec;
  spec.shape = *find_model_shape(shape);
  spec.weight_type = type;
  spec.expert_layout = layout;
  const std::string path = keel::testing::make_temp_dir("moe-shape") + "/m.gguf";
  ThreadPool pool(1);
  const Status st = write_random_model(spec, path, pool);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return path;
}

// Stacked, merged gate/up and one-tensor-per-expert files hold the same values; keel computes
// the same logits from each (grouped Q8_0 weights, so the row-group rewrite of 3-D and merged
// tensors is covered too).
TEST(MoeForwardTest, ExpertLayoutsAgree) {
  std::vector<std::vector<float>> out;
  for (ExpertLayout l : {ExpertLayout::kStacked, ExpertLayout::kGateUp, ExpertLayout::kPerExpert}) {
    Runner r(write_shape("mixtral-tiny", DType::kQ8_0, l));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.model().weights().layers[0].moe.up[3].layout, kernels::WeightLayout::kGrouped16);
    out.push_back(r.feed({1, 10, 20, 30, 40, 5}, 0));
  }
  EXPECT_EQ(out[0], out[1]);
  EXPECT_EQ(out[0], out[2]);
}

std::vector<float> random_rows(int64_t n, int64_t d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * d));
  for (float& v : x) v = normal(rng);
  return x;
}

struct LayerCase {
  const char* shape;
  DType type;
};

class MoeLayerTest : public ::testing::TestWithParam<LayerCase> {};

// The grouped path against the naive per-token loop over the same kernels: relative error ≤ 1e-5
// (the counts of bit-identical rows are printed), on a batch of 40 tokens (several per expert), and
// bit for bit on single tokens (the decode path: every chosen expert's gate/up in one call, their
// down projections in another).
TEST_P(MoeLayerTest, GroupedMatchesNaiveLoop) {
  Runner r(write_shape(GetParam().shape, GetParam().type, ExpertLayout::kStacked), {}, 2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HParams& hp = r.model().hparams();
  const MoeWeights& w = r.model().weights().layers[1].moe;
  constexpr int64_t kN = 40;
  const std::vector<float> x = random_rows(kN, hp.n_embd, 11);
  MoeFfn moe(hp, kN);
  std::vector<float> fast(x.size()), naive(x.size());
  moe.forward(w, x.data(), kN, r.ops(), fast.data());
  const std::vector<int32_t> chosen(moe.experts(kN).begin(), moe.experts(kN).end());
  moe.forward_naive(w, x.data(), kN, r.ops(), naive.data());
  EXPECT_EQ(chosen, std::vector<int32_t>(moe.experts(kN).begin(), moe.experts(kN).end()));
  double worst = 0.0, norm = 0.0;
  size_t exact = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(double{fast[i]} - naive[i]));
    norm = std::max(norm, std::fabs(double{naive[i]}));
    exact += fast[i] == naive[i];
  }
  std::printf("%s %s: max |grouped - naive| = %.3g (max |y| %.3g), %zu/%zu values bit-exact\n",
              GetParam().shape, std::string(dtype_name(GetParam().type)).c_str(), worst, norm,
              exact, x.size());
  EXPECT_GT(norm, 0.01);
  EXPECT_LE(worst, 1e-5 * norm);
  std::set<int32_t> distinct(chosen.begin(), chosen.end());
  EXPECT_GE(distinct.size(), 4u) << "routing too concentrated to exercise the buckets";
  for (int64_t t = 0; t < 5; ++t) {
    const float* row = x.data() + t * hp.n_embd;
    std::vector<float> one(static_cast<size_t>(hp.n_embd)), ref(one.size());
    moe.forward(w, row, 1, r.ops(), one.data());
    moe.forward_naive(w, row, 1, r.ops(), ref.data());
    EXPECT_EQ(one, ref) << "token " << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MoeLayerTest,
                         ::testing::Values(LayerCase{"qwen3moe-tiny", DType::kF32},
                                           LayerCase{"qwen3moe-tiny", DType::kQ8_0},
                                           LayerCase{"qwen2moe-tiny", DType::kQ4_K},
                                           LayerCase{"mixtral-tiny", DType::kQ4_0}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.shape) + "_" +
                                           std::string(dtype_name(info.param.type));
                           for (char& c : n) c = std::isalnum(c) ? c : '_';
                           return n;
                         });

// The decode path with many chosen experts (gate/up of 8 experts per call, the down projections
// of 16 per call, so k = 20 takes several calls of each) equals the naive loop bit for bit: the
// file's 8 experts repeated as 20, routed by a random F32 router, k = 8, 9 and 20.
TEST(MoeLayerTest, DecodeOfManyExpertsMatchesNaiveLoop) {
  Runner r(write_shape("qwen3moe-tiny", DType::kQ4_0, ExpertLayout::kStacked), {}, 2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  HParams hp = r.model().hparams();
  const MoeWeights& file = r.model().weights().layers[0].moe;
  constexpr int64_t kExperts = 20;
  MoeWeights w = file;
  for (auto* bank : {&w.gate, &w.up, &w.down}) bank->clear();
  for (int64_t e = 0; e < kExperts; ++e) {
    const auto f = static_cast<size_t>(e % hp.moe.n_expert);
    w.gate.push_back(file.gate[f]);
    w.up.push_back(file.up[f]);
    w.down.push_back(file.down[f]);
  }
  const std::vector<float> router = random_rows(kExperts, hp.n_embd, 5);
  w.router = kernels::Matrix{DType::kF32, kExperts, hp.n_embd,
                             reinterpret_cast<const std::byte*>(router.data()),
                             static_cast<size_t>(hp.n_embd) * sizeof(float)};
  hp.moe.n_expert = kExperts;
  for (int64_t k : {8, 9, 20}) {
    hp.moe.n_expert_used = k;
    MoeFfn moe(hp, 1);
    for (int64_t t = 0; t < 3; ++t) {
      const std::vector<float> x = random_rows(1, hp.n_embd, static_cast<uint32_t>(20 + t));
      std::vector<float> one(x.size()), ref(x.size());
      moe.forward(w, x.data(), 1, r.ops(), one.data());
      moe.forward_naive(w, x.data(), 1, r.ops(), ref.data());
      EXPECT_EQ(one, ref) << "k " << k << " token " << t;
    }
  }
}

// Decode reads only the chosen experts: with every other expert's matrices pointing nowhere,
// the step computes the same output (a read of one would crash under ASan or fault).
TEST(MoeLayerTest, DecodeTouchesOnlyChosenExperts) {
  Runner r(write_shape("qwen3moe-tiny", DType::kQ8_0, ExpertLayout::kStacked));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HParams& hp = r.model().hparams();
  MoeWeights w = r.model().weights().layers[0].moe;
  const std::vector<float> x = random_rows(1, hp.n_embd, 3);
  MoeFfn moe(hp, 1);
  std::vector<float> a(x.size()), b(x.size());
  moe.forward(w, x.data(), 1, r.ops(), a.data());
  const std::set<int32_t> chosen(moe.experts(1).begin(), moe.experts(1).end());
  ASSERT_EQ(chosen.size(), 2u);
  for (int32_t e = 0; e < 8; ++e) {
    if (chosen.contains(e)) continue;
    for (auto* bank : {&w.gate, &w.up, &w.down}) (*bank)[static_cast<size_t>(e)].data = nullptr;
  }
  moe.forward(w, x.data(), 1, r.ops(), b.data());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace keel::model::testing

namespace keel::model {
namespace {

// qwen3moe-small's dense twins (bench/moe_dense_twins.sh) are the yardsticks of the MoE decode
// targets: the same attention, and an FFN with as many parameters as the active experts (top-k
// of them) and as all the experts.
TEST(MoeShapeTest, TheDenseTwinsMatchTheActiveAndTotalFfnParameters) {
  const ModelShape moe = *find_model_shape("qwen3moe-small");
  const ModelShape active = *find_model_shape("qwen3moe-small-dense-active");
  const ModelShape total = *find_model_shape("qwen3moe-small-dense-total");
  for (const ModelShape* d : {&active, &total}) {
    EXPECT_EQ(d->arch, "qwen3");
    EXPECT_EQ(d->n_expert, 0);
    EXPECT_EQ(d->n_embd, moe.n_embd);
    EXPECT_EQ(d->n_layer, moe.n_layer);
    EXPECT_EQ(d->n_head, moe.n_head);
    EXPECT_EQ(d->n_head_kv, moe.n_head_kv);
    EXPECT_EQ(d->head_size(), moe.head_size());
    EXPECT_EQ(d->n_vocab, moe.n_vocab);
  }
  EXPECT_EQ(active.n_ff, moe.n_expert_used * moe.n_ff_exp);
  EXPECT_EQ(total.n_ff, moe.n_expert * moe.n_ff_exp);
}

}  // namespace
}  // namespace keel::model
