// LoRA adapters on the forward pass (lora_adapter.h, lora_batch.h, random_lora.h), on tiny F32
// models written in-test:
//   - an adapter applied per sequence gives the logits (within 1e-4) and greedy tokens of the
//     base model with scale·B·A merged into its weights, for every target and a subset, F32 and
//     F16 adapter tensors, llama and qwen2 (biases); and it does change the model's output;
//   - one batch mixing the base model and two adapters gives each sequence the logits it gets
//     alone;
//   - malformed adapters are refused with errors naming the file and the tensor at fault.
#include <gtest/gtest.h>

#include <filesystem>

#include "gguf/writer.h"
#include "model/random_lora.h"
#include "support/test_support.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

std::vector<float> matrix_values(const kernels::Matrix& m) {
  std::vector<float> out(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r) {
    kernels::dequantize_row(m.dtype, m.data + static_cast<size_t>(r) * m.row_bytes,
                            out.data() + r * m.cols, m.cols);
  }
  return out;
}

// The base model's file with W += scale·B·A (in double) for every pair of the adapter.
std::unique_ptr<Model> merged_model(const std::string& base_path, const LoraAdapter& adapter) {
  auto file = gguf::GgufFile::open(base_path);
  EXPECT_TRUE(file.ok()) << file.status().to_string();
  for (size_t il = 0; il < adapter.layers().size(); ++il) {
    for (size_t t = 0; t < kNumLoraTargets; ++t) {
      const std::optional<LoraPair>& pair = adapter.layers()[il][t];
      if (!pair) continue;
      const gguf::TensorInfo* info =
          file->find_tensor(lora_base_tensor_name(static_cast<LoraTarget>(t), int64_t(il)));
      EXPECT_NE(info, nullptr);
      EXPECT_EQ(info->dtype, DType::kF32);
      auto* w = reinterpret_cast<float*>(file->mutable_tensor_data(*info).data());
      const std::vector<float> a = matrix_values(pair->a), b = matrix_values(pair->b);
      const int64_t rank = pair->a.rows, in = pair->a.cols, out = pair->b.rows;
      for (int64_t r = 0; r < out; ++r) {
        for (int64_t c = 0; c < in; ++c) {
          double d = 0;
          for (int64_t k = 0; k < rank; ++k) d += double{b[r * rank + k]} * a[k * in + c];
          w[r * in + c] += static_cast<float>(adapter.effective_scale() * d);
        }
      }
    }
  }
  auto m = Model::load(std::move(*file));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(*m);
}

struct MergeCase {
  const char* name;
  const char* arch;
  const char* targets;  // "" = all
  DType dtype;
  int64_t rank;
};
void PrintTo(const MergeCase& c, std::ostream* os) { *os << c.name; }

class LoraMergeTest : public ::testing::TestWithParam<MergeCase> {};

TEST_P(LoraMergeTest, MatchesTheMergedWeights) {
  const MergeCase& c = GetParam();
  TinySpec spec;
  spec.arch = c.arch;
  spec.n_embd = 64;
  spec.n_ff = 96;
  const TinyModel tiny = write_tiny_model(spec);
  Runner runner(tiny.path);
  ASSERT_TRUE(runner.ok()) << runner.status().to_string();
  RandomLoraSpec ls;
  ls.rank = c.rank;
  ls.dtype = c.dtype;
  ls.seed = 7;
  auto targets = parse_lora_targets(c.targets[0] ? c.targets : "q,k,v,o,gate,up,down");
  ASSERT_TRUE(targets.ok());
  ls.targets = *targets;
  const std::string path = keel::testing::make_temp_dir("lora") + "/a.gguf";
  ASSERT_TRUE(write_random_lora(ls, runner.model(), path).ok());
  auto adapter = LoraAdapter::open(path, runner.model());
  ASSERT_TRUE(adapter.ok()) << adapter.status().to_string();
  EXPECT_EQ((*adapter)->rank(), c.rank);
  const std::unique_ptr<Model> merged = merged_model(tiny.path, **adapter);

  const std::vector<int32_t> prompt = {1, 7, 3, 22, 5, 9, 14, 30, 2, 11, 8};
  const std::vector<float> base_logits = runner.feed(prompt, 1);
  runner.set_lora(0, adapter->get());
  const std::vector<float> lora_logits = runner.feed(prompt, 0);
  // The merged model through a Context of its own over the same runner storage (sequence 2).
  Context merged_ctx(*merged, 64);
  Batch b = runner.batch();
  for (size_t i = 0; i < prompt.size(); ++i) b.add(prompt[i], int32_t(i), 2, true);
  std::vector<float> merged_logits;
  ASSERT_TRUE(merged_ctx.forward(b, runner.storage(), runner.ops(), &merged_logits).ok());
  EXPECT_LT(max_abs_diff(lora_logits, merged_logits), 1e-4);
  EXPECT_GT(max_abs_diff(lora_logits, base_logits), 1e-2) << "the adapter changed nothing";

  // Greedy decoding, token by token: the same tokens from both.
  const std::vector<int32_t> with_lora = runner.greedy(prompt, 12, 0, true);
  std::vector<int32_t> with_merged;
  {
    Runner m(tiny.path);  // the merged weights, through the Runner's greedy loop
    ASSERT_TRUE(m.ok());
    Context ctx(*merged, 64);
    std::vector<float> logits;
    Batch mb = m.batch();
    for (size_t i = 0; i < prompt.size(); ++i)
      mb.add(prompt[i], int32_t(i), 0, i + 1 == prompt.size());
    ASSERT_TRUE(ctx.forward(mb, m.storage(), m.ops(), &logits).ok());
    auto pos = static_cast<int32_t>(prompt.size());
    for (int i = 0; i < 12; ++i) {
      with_merged.push_back(argmax(logits));
      mb.clear_tokens();
      mb.add(with_merged.back(), pos++, 0, true);
      ASSERT_TRUE(ctx.forward(mb, m.storage(), m.ops(), &logits).ok());
    }
  }
  EXPECT_EQ(with_lora, with_merged);
}

INSTANTIATE_TEST_SUITE_P(
    Lora, LoraMergeTest,
    ::testing::Values(MergeCase{"llama_all_f32", "llama", "", DType::kF32, 8},
                      MergeCase{"llama_attention_f16", "llama", "q,v,o", DType::kF16, 4},
                      MergeCase{"llama_ffn_rank5", "llama", "gate,up,down", DType::kF32, 5},
                      MergeCase{"qwen2_all_f32", "qwen2", "", DType::kF32, 8}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(LoraBatchTest, MixedBatchMatchesEachAlone) {
  TinySpec spec;
  spec.n_embd = 64;
  spec.n_ff = 96;
  const TinyModel tiny = write_tiny_model(spec);
  const std::string dir = keel::testing::make_temp_dir("lora");
  std::vector<std::unique_ptr<LoraAdapter>> adapters;
  {
    Runner r(tiny.path);
    ASSERT_TRUE(r.ok());
    for (uint64_t seed : {3u, 4u}) {
      RandomLoraSpec ls;
      ls.rank = 8;
      ls.seed = seed;
      const std::string path = dir + "/a" + std::to_string(seed) + ".gguf";
      ASSERT_TRUE(write_random_lora(ls, r.model(), path).ok());
    }
  }
  RunnerKv kv;
  kv.block_size = 4;
  Runner mixed(tiny.path, {}, 2, 64, kv), alone(tiny.path, {}, 1, 64, kv);
  ASSERT_TRUE(mixed.ok() && alone.ok());
  for (const char* name : {"/a3.gguf", "/a4.gguf"}) {
    auto a = LoraAdapter::open(dir + name, mixed.model());
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    adapters.push_back(std::move(*a));
  }
  const std::vector<std::vector<int32_t>> prompts = {
      {1, 5, 9, 13, 17, 21, 25}, {2, 6, 10, 14, 18, 22, 26}, {3, 7, 11, 15, 19, 23, 27}};
  // Sequence s uses: base, adapter 0, adapter 1; the fourth sequence repeats adapter 0.
  const LoraAdapter* use[] = {nullptr, adapters[0].get(), adapters[1].get(), adapters[0].get()};
  std::vector<std::vector<float>> expected;
  for (int32_t s = 0; s < 4; ++s) {
    alone.set_lora(s, use[s]);
    expected.push_back(alone.feed(prompts[size_t(s) % 3], s));
  }
  // One batch: the four prompts interleaved token by token.
  for (int32_t s = 0; s < 4; ++s) mixed.set_lora(s, use[s]);
  Batch b = mixed.batch();
  for (size_t i = 0; i < prompts[0].size(); ++i) {
    for (int32_t s = 0; s < 4; ++s) b.add(prompts[size_t(s) % 3][i], int32_t(i), s, true);
  }
  std::vector<float> logits;
  ASSERT_TRUE(mixed.forward(b, &logits).ok());
  const auto nv = static_cast<size_t>(mixed.n_vocab());
  for (int32_t s = 0; s < 4; ++s) {
    for (size_t i = 0; i < prompts[0].size(); ++i) {
      EXPECT_LT(max_abs_diff(logits.data() + (i * 4 + size_t(s)) * nv,
                             expected[size_t(s)].data() + i * nv, nv),
                1e-5)
          << "seq " << s << " token " << i;
    }
  }
  // The two adapters differ from each other and from the base.
  EXPECT_GT(max_abs_diff(expected[0], expected[3]), 1e-2);
  EXPECT_GT(max_abs_diff(expected[1], expected[2]), 1e-2);
}

// Writes an adapter GGUF by hand: `tensors` as (name, GGML shape, dtype), zero-filled.
std::string write_adapter(
    const std::string& dir, const std::string& name,
    const std::vector<std::tuple<std::string, std::vector<int64_t>, DType>>& tensors,
    const std::string& arch = "llama", const std::string& type = "adapter") {
  gguf::GgufWriter w;
  w.set("general.architecture", arch);
  w.set("general.type", type);
  w.set("adapter.type", std::string("lora"));
  w.set("adapter.lora.alpha", 8.0f);
  for (const auto& [tname, shape, dtype] : tensors) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<std::byte> bytes(dtype_row_bytes(dtype, shape[0]) * size_t(n / shape[0]));
    EXPECT_TRUE(w.add_tensor(tname, dtype, shape, bytes).ok());
  }
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

TEST(LoraAdapterTest, RefusesMalformedAdapters) {
  const TinyModel tiny = write_tiny_model(TinySpec{});  // n_embd 32, q_dim 32, kv_dim 16
  Runner r(tiny.path);
  ASSERT_TRUE(r.ok());
  const std::string dir = keel::testing::make_temp_dir("lora");
  const auto f32 = DType::kF32;
  const std::string q = "blk.0.attn_q.weight";
  struct Case {
    std::string path;
    StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {tiny.path, StatusCode::kInvalidArgument, "not a LoRA adapter (general.type is missing"},
      {write_adapter(dir, "arch.gguf",
                     {{q + ".lora_a", {32, 4}, f32}, {q + ".lora_b", {4, 32}, f32}}, "qwen3"),
       StatusCode::kInvalidArgument, "architecture 'qwen3', the base model is 'llama'"},
      {write_adapter(dir, "empty.gguf", {}), StatusCode::kInvalidArgument, "has no tensors"},
      {write_adapter(dir, "unpaired.gguf", {{q + ".lora_a", {32, 4}, f32}}),
       StatusCode::kInvalidArgument, "'blk.0.attn_q.weight' has a .lora_a tensor but no .lora_b"},
      {write_adapter(dir, "suffix.gguf", {{q, {32, 32}, f32}}), StatusCode::kInvalidArgument,
       "tensor 'blk.0.attn_q.weight' is neither a .lora_a nor a .lora_b"},
      {write_adapter(dir, "layer.gguf",
                     {{"blk.9.attn_q.weight.lora_a", {32, 4}, f32},
                      {"blk.9.attn_q.weight.lora_b", {4, 32}, f32}}),
       StatusCode::kInvalidArgument, "'blk.9.attn_q.weight' names no matrix keel can adapt"},
      {write_adapter(dir, "norm.gguf",
                     {{"blk.0.attn_norm.weight.lora_a", {32, 4}, f32},
                      {"blk.0.attn_norm.weight.lora_b", {4, 1}, f32}}),
       StatusCode::kInvalidArgument, "names no matrix keel can adapt"},
      {write_adapter(dir, "shape.gguf",
                     {{"blk.0.attn_k.weight.lora_a", {32, 4}, f32},
                      {"blk.0.attn_k.weight.lora_b", {4, 32}, f32}}),
       StatusCode::kInvalidArgument,
       "'blk.0.attn_k.weight' has lora_a {32, 4} and lora_b {4, 32}; the base matrix {32, 16} "
       "needs lora_a {32, rank} and lora_b {rank, 16}"},
      {write_adapter(dir, "transposed.gguf",
                     {{q + ".lora_a", {4, 32}, f32}, {q + ".lora_b", {4, 32}, f32}}),
       StatusCode::kInvalidArgument, "has lora_a {4, 32}"},
      {write_adapter(dir, "ranks.gguf",
                     {{q + ".lora_a", {32, 4}, f32},
                      {q + ".lora_b", {4, 32}, f32},
                      {"blk.1.attn_q.weight.lora_a", {32, 2}, f32},
                      {"blk.1.attn_q.weight.lora_b", {2, 32}, f32}}),
       StatusCode::kInvalidArgument, "'blk.1.attn_q.weight' has rank 2, other tensors rank 4"},
      {write_adapter(
           dir, "q8.gguf",
           {{q + ".lora_a", {32, 4}, DType::kQ8_0}, {q + ".lora_b", {32, 32}, DType::kQ8_0}}),
       StatusCode::kUnsupported, "lora_a has type Q8_0 (LoRA tensors must be F32, F16 or BF16)"},
      {dir + "/missing.gguf", StatusCode::kNotFound, "missing.gguf"},
  };
  for (const Case& c : cases) {
    auto a = LoraAdapter::open(c.path, r.model());
    ASSERT_FALSE(a.ok()) << c.path;
    EXPECT_EQ(a.status().code(), c.code) << a.status().to_string();
    EXPECT_NE(a.status().message().find(c.message), std::string::npos) << a.status().to_string();
    EXPECT_NE(a.status().message().find(c.path), std::string::npos) << a.status().to_string();
  }
}

TEST(LoraAdapterTest, ReadsAlphaAndDigestsContent) {
  const TinyModel tiny = write_tiny_model(TinySpec{});
  Runner r(tiny.path);
  ASSERT_TRUE(r.ok());
  const std::string dir = keel::testing::make_temp_dir("lora");
  RandomLoraSpec ls;
  ls.rank = 4;
  ls.alpha = 2.0f;
  ls.targets = {LoraTarget::kQ, LoraTarget::kDown};
  ASSERT_TRUE(write_random_lora(ls, r.model(), dir + "/a.gguf").ok());
  ls.seed = 2;
  ASSERT_TRUE(write_random_lora(ls, r.model(), dir + "/b.gguf").ok());
  auto a = LoraAdapter::open(dir + "/a.gguf", r.model());
  auto a2 = LoraAdapter::open(dir + "/a.gguf", r.model());
  auto a_scaled = LoraAdapter::open(dir + "/a.gguf", r.model(), 0.5f);
  auto b = LoraAdapter::open(dir + "/b.gguf", r.model());
  ASSERT_TRUE(a.ok() && a2.ok() && a_scaled.ok() && b.ok());
  EXPECT_FLOAT_EQ((*a)->alpha(), 2.0f);
  EXPECT_FLOAT_EQ((*a)->effective_scale(), 0.5f);          // alpha / rank
  EXPECT_FLOAT_EQ((*a_scaled)->effective_scale(), 0.25f);  // × the adapter's own scale
  EXPECT_EQ((*a)->targets_string(), "q,down");
  EXPECT_EQ((*a)->content_digest(), (*a2)->content_digest());
  EXPECT_NE((*a)->content_digest(), (*b)->content_digest());  // same shapes, other values
  EXPECT_NE((*a)->content_digest(), (*a_scaled)->content_digest());
  EXPECT_FALSE(parse_lora_targets("q,x").ok());
  EXPECT_FALSE(write_random_lora(RandomLoraSpec{.rank = 0}, r.model(), dir + "/c.gguf").ok());
}

TEST(LoraAdapterTest, ContextRefusesAnAdapterOfAnotherModel) {
  TinySpec small;
  TinySpec deep;
  deep.n_layer = 3;
  const TinyModel a = write_tiny_model(small), b = write_tiny_model(deep);
  Runner ra(a.path), rb(b.path);
  ASSERT_TRUE(ra.ok() && rb.ok());
  const std::string dir = keel::testing::make_temp_dir("lora");
  ASSERT_TRUE(write_random_lora(RandomLoraSpec{.rank = 2}, rb.model(), dir + "/deep.gguf").ok());
  auto adapter = LoraAdapter::open(dir + "/deep.gguf", rb.model());
  ASSERT_TRUE(adapter.ok());
  ra.set_lora(0, adapter->get());
  Batch batch = ra.batch();
  batch.add(1, 0, 0, true);
  std::vector<float> logits;
  const Status s = ra.forward(batch, &logits);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("loaded for a model of 3 layers, not 2"), std::string::npos)
      << s.to_string();
}

}  // namespace
}  // namespace keel::model::testing
