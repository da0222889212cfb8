// Real-model checks on stories260K (llama2.c, llama arch, GQA, all F32) against llama.cpp's
// reference outputs: greedy continuations (exact ids) and full-vocabulary logits.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/test_support.h"
#include "test_util.h"

namespace keel::model::testing {
namespace {

using nlohmann::json;

// llama.cpp (F32 KV cache, no flash attention) vs. the float64 numpy reference differ by ≤ 5.1e-6.
// keel's f32 forward is held to the same order against both (observed ≈ 1.3e-5 against llama.cpp
// with the scalar kernels; the margin leaves room for SIMD summation orders).
constexpr double kLogitTolerance = 3e-5;

std::string stories(const std::string& rel) {
  return keel::testing::shared_path("models/stories260K/" + rel);
}

json load_json(const std::string& path) {
  return json::parse(keel::testing::read_file(path), nullptr, /*allow_exceptions=*/false);
}

TEST(StoriesTest, HyperParameters) {
  KEEL_REQUIRE_SHARED();
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const HParams& hp = r.model().hparams();
  EXPECT_EQ(hp.arch, Arch::kLlama);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_EQ(hp.head_dim, 8);
  EXPECT_EQ(hp.n_ff, 172);
  EXPECT_EQ(hp.n_ctx_train, 512);
  EXPECT_EQ(r.model().n_ctx(), 512);
  EXPECT_FLOAT_EQ(hp.rope.freq_base, 10000.0f);
  EXPECT_EQ(hp.rope.n_rot, 8);
  EXPECT_FALSE(hp.rope.neox);
  EXPECT_FALSE(r.model().weights().tied_output);  // the converter wrote a copy as output.weight
}

TEST(StoriesTest, GreedyMatchesLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/greedy.json"));
  ASSERT_TRUE(ref.contains("results"));
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(ref["results"].size(), 5u);
  for (const json& item : ref["results"]) {
    const auto prompt = item["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = item["gen_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(expected.size(), 64u);
    EXPECT_EQ(r.greedy(prompt, 64), expected) << "prompt: " << item["prompt"];
  }
}

TEST(StoriesTest, GreedyTokenByTokenMatchesLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/greedy.json"));
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (size_t i : {size_t{0}, size_t{1}}) {
    const json& item = ref["results"][i];
    EXPECT_EQ(r.greedy(item["prompt_ids"].get<std::vector<int32_t>>(), 64, /*slot=*/1,
                       /*one_by_one=*/true),
              item["gen_ids"].get<std::vector<int32_t>>())
        << "prompt: " << item["prompt"];
  }
}

TEST(StoriesTest, LogitsOnceUponATime) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/logits_once_upon_a_time.json"));
  const auto expected = ref["logits"].get<std::vector<float>>();
  ASSERT_EQ(expected.size(), 512u);
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<float> all = r.feed(ref["prompt_ids"].get<std::vector<int32_t>>(), 0);
  const std::vector<float> last(all.end() - 512, all.end());
  const double diff = max_abs_diff(last, expected);
  std::printf("stories260K 'Once upon a time': max |dlogit| = %.3g\n", diff);
  EXPECT_LE(diff, kLogitTolerance);
  EXPECT_EQ(argmax(last), ref["argmax"].get<int32_t>());
  EXPECT_EQ(argmax(last), argmax(expected));
}

TEST(StoriesTest, LogitsAfterEveryPrompt) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/logits_after_prompt.json"));
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(ref["results"].size(), 5u);
  double worst = 0.0, worst_f64 = 0.0;
  for (const json& item : ref["results"]) {
    const auto expected = item["logits_llamacpp_f32kv_nofa"].get<std::vector<float>>();
    const auto f64 = item["logits_numpy_f64"].get<std::vector<float>>();
    r.cache().clear(0);
    const std::vector<float> all = r.feed(item["prompt_ids"].get<std::vector<int32_t>>(), 0);
    const std::vector<float> last(all.end() - 512, all.end());
    const double diff = max_abs_diff(last, expected);
    worst = std::max(worst, diff);
    worst_f64 = std::max(worst_f64, max_abs_diff(last, f64));
    EXPECT_LE(diff, kLogitTolerance) << "prompt: " << item["prompt"];
    EXPECT_LE(max_abs_diff(last, f64), kLogitTolerance) << "prompt: " << item["prompt"];
    EXPECT_EQ(argmax(last), item["argmax"].get<int32_t>()) << "prompt: " << item["prompt"];
  }
  std::printf("stories260K, 5 prompts: max |dlogit| = %.3g vs llama.cpp, %.3g vs numpy f64\n",
              worst, worst_f64);
}

TEST(StoriesTest, MmapGivesTheSameLogits) {
  KEEL_REQUIRE_SHARED();
  Runner a(stories("stories260K.gguf"));
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  auto mapped = Model::open(stories("stories260K.gguf"), {}, gguf::DataMode::kMmap);
  ASSERT_TRUE(mapped.ok()) << mapped.error().to_string();
  auto cache = KvCache::for_model(**mapped);
  ASSERT_TRUE(cache.ok());
  Context ctx(**mapped, 8);
  Batch b;
  for (int32_t i = 0; i < 5; ++i)
    b.add(std::vector<int32_t>{1, 403, 407, 261, 378}[i], i, 0, i == 4);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(b, *cache, a.ops(), &logits).ok());
  const std::vector<float> ref = a.feed({1, 403, 407, 261, 378}, 0);
  EXPECT_EQ(max_abs_diff(logits, std::vector<float>(ref.end() - 512, ref.end())), 0.0);
}

}  // namespace
}  // namespace keel::model::testing
