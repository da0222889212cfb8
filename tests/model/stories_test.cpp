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
    EXPECT_EQ(r.greedy(item["prompt_ids"].get<std::vector<int32_t>>(), 64, /*seq=*/1,
                       /*one_by_one=*/true),
              item["gen_ids"].get<std::vector<int32_t>>())
        << "prompt: " << item["prompt"];
  }
}

// f16 KV (rows rounded to nearest-even when written): the same greedy ids as llama.cpp's f32-KV
// reference for every prompt, and logits at every prompt position within kF16KvTolerance of f32
// KV (relative rounding 2^-11 per K/V element; logits span ~±15). Observed with every kernel
// table: all 5 × 64 ids equal; max |dlogit| vs f32 KV 0.0162.
constexpr double kF16KvTolerance = 0.03;

TEST(StoriesTest, F16KvGreedyMatchesLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/greedy.json"));
  RunnerKv kv;
  kv.dtype = DType::kF16;
  Runner r(stories("stories260K.gguf"), {}, 1, 64, kv);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(ref["results"].size(), 5u);
  for (const json& item : ref["results"]) {
    const auto prompt = item["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = item["gen_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = r.greedy(prompt, 64);
    size_t first_diff = 0;
    while (first_diff < got.size() && got[first_diff] == expected[first_diff]) ++first_diff;
    EXPECT_EQ(got, expected) << "prompt: " << item["prompt"] << " first divergence at generated "
                             << first_diff;
  }
}

TEST(StoriesTest, F16KvLogitsCloseToF32Kv) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/logits_after_prompt.json"));
  RunnerKv kv;
  kv.dtype = DType::kF16;
  Runner f16(stories("stories260K.gguf"), {}, 1, 64, kv);
  Runner f32(stories("stories260K.gguf"));
  ASSERT_TRUE(f16.ok() && f32.ok());
  double worst = 0.0;
  for (const json& item : ref["results"]) {
    const auto prompt = item["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<float> a = f16.feed(prompt, 0), b = f32.feed(prompt, 0);
    const double d = max_abs_diff(a, b);
    worst = std::max(worst, d);
    EXPECT_LE(d, kF16KvTolerance) << "prompt: " << item["prompt"];
    EXPECT_EQ(argmax(a.data() + a.size() - 512, 512), item["argmax"].get<int32_t>());
  }
  std::printf("stories260K f16 KV vs f32 KV, every prompt position: max |dlogit| = %.3g\n", worst);
  EXPECT_GT(worst, 0.0) << "f16 rounding should change something";
}

// Q8_0 KV (rows quantized in blocks of 32 values when written): greedy ids against llama.cpp's
// f32-KV reference — at least kQ8MinSharedPrefix ids of every prompt's 64 equal before the first
// divergence, and at least kQ8MinAgreement of all ids equal position by position — and logits at
// every prompt position within kQ8KvTolerance of f32 KV. stories260K's heads have 8 values, so
// 4 KV heads share one block's scale (the hardest case: a head's step is set by the largest of
// 32 values). Observed (avx512 table): 286 / 320 ids equal, shortest shared prefix 35, max
// |dlogit| 0.946 (logits span ~±15).
constexpr size_t kQ8MinSharedPrefix = 24;
constexpr double kQ8MinAgreement = 0.8;
constexpr double kQ8KvTolerance = 1.5;

TEST(StoriesTest, Q8KvGreedyCloseToLlamaCpp) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/greedy.json"));
  RunnerKv kv;
  kv.dtype = DType::kQ8_0;
  Runner r(stories("stories260K.gguf"), {}, 1, 64, kv);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  size_t same = 0, total = 0, shortest = 64;
  for (const json& item : ref["results"]) {
    const auto prompt = item["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = item["gen_ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = r.greedy(prompt, 64);
    ASSERT_EQ(got.size(), expected.size());
    size_t first_diff = 0;
    while (first_diff < got.size() && got[first_diff] == expected[first_diff]) ++first_diff;
    shortest = std::min(shortest, first_diff);
    EXPECT_GE(first_diff, kQ8MinSharedPrefix) << "prompt: " << item["prompt"];
    for (size_t i = 0; i < got.size(); ++i) same += got[i] == expected[i] ? 1 : 0;
    total += got.size();
  }
  std::printf(
      "stories260K Q8_0 KV greedy vs llama.cpp f32 KV: %zu / %zu ids equal, shortest "
      "shared prefix %zu\n",
      same, total, shortest);
  EXPECT_GE(static_cast<double>(same), kQ8MinAgreement * static_cast<double>(total));
}

TEST(StoriesTest, Q8KvLogitsCloseToF32Kv) {
  KEEL_REQUIRE_SHARED();
  const json ref = load_json(stories("reference/logits_after_prompt.json"));
  RunnerKv kv;
  kv.dtype = DType::kQ8_0;
  Runner q8(stories("stories260K.gguf"), {}, 1, 64, kv);
  Runner f32(stories("stories260K.gguf"));
  ASSERT_TRUE(q8.ok() && f32.ok());
  double worst = 0.0;
  for (const json& item : ref["results"]) {
    const auto prompt = item["prompt_ids"].get<std::vector<int32_t>>();
    const std::vector<float> a = q8.feed(prompt, 0), b = f32.feed(prompt, 0);
    const double d = max_abs_diff(a, b);
    worst = std::max(worst, d);
    EXPECT_LE(d, kQ8KvTolerance) << "prompt: " << item["prompt"];
  }
  std::printf("stories260K Q8_0 KV vs f32 KV, every prompt position: max |dlogit| = %.3g\n", worst);
  EXPECT_GT(worst, 0.0) << "Q8_0 quantization should change something";
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
  Runner r(stories("stories260K.gguf"), {}, /*threads=*/2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_EQ(ref["results"].size(), 5u);
  double worst = 0.0, worst_f64 = 0.0;
  for (const json& item : ref["results"]) {
    const auto expected = item["logits_llamacpp_f32kv_nofa"].get<std::vector<float>>();
    const auto f64 = item["logits_numpy_f64"].get<std::vector<float>>();
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
  auto kv = KvStorage::create(KvLayout::for_model((*mapped)->hparams(), 4, DType::kF32), 2);
  ASSERT_TRUE(kv.ok());
  Context ctx(**mapped, 8);
  Batch b;
  b.add_seq({1, 0});
  for (int32_t i = 0; i < 5; ++i)
    b.add(std::vector<int32_t>{1, 403, 407, 261, 378}[i], i, 0, i == 4);
  std::vector<float> logits;
  ASSERT_TRUE(ctx.forward(b, *kv, a.ops(), &logits).ok());
  const std::vector<float> ref = a.feed({1, 403, 407, 261, 378}, 0);
  EXPECT_EQ(max_abs_diff(logits, std::vector<float>(ref.end() - 512, ref.end())), 0.0);
}

// Batch invariance: sequences sharing one flat batch get the same logits as when run alone.
// Each token's row is computed independently, so the scalar kernels agree exactly; the asserted
// tolerance leaves room for batched SIMD kernels.
constexpr double kBatchTolerance = 1e-5;
const std::vector<int32_t> kPromptA = {1, 403, 407, 261, 378};
const std::vector<int32_t> kPromptB = {1, 317, 269, 274, 287, 263, 377, 267, 265, 282, 295, 433};

TEST(StoriesBatchTest, TwoPromptsInOneBatchEqualEachAlone) {
  KEEL_REQUIRE_SHARED();
  Runner r(stories("stories260K.gguf"), {}, /*threads=*/2);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<float> alone_a = r.feed(kPromptA, 0);
  const std::vector<float> alone_b = r.feed(kPromptB, 1);
  // Interleave the two prompts: B's tokens at even places, A's after B's first tokens.
  Batch b = r.batch();
  size_t ia = 0, ib = 0;
  std::vector<int> owner;
  while (ia < kPromptA.size() || ib < kPromptB.size()) {
    if (ib < kPromptB.size()) {
      b.add(kPromptB[ib], static_cast<int32_t>(ib), 2, true);
      owner.push_back(1);
      ++ib;
    }
    if (ia < kPromptA.size() && ib > 2) {
      b.add(kPromptA[ia], static_cast<int32_t>(ia), 3, true);
      owner.push_back(0);
      ++ia;
    }
  }
  std::vector<float> logits;
  ASSERT_TRUE(r.forward(b, &logits).ok());
  ASSERT_EQ(logits.size(), (kPromptA.size() + kPromptB.size()) * 512);
  size_t na = 0, nb = 0;
  double worst = 0.0;
  for (size_t i = 0; i < owner.size(); ++i) {
    const float* ref = owner[i] == 0 ? alone_a.data() + 512 * na++ : alone_b.data() + 512 * nb++;
    worst = std::max(worst, max_abs_diff(logits.data() + 512 * i, ref, 512));
  }
  std::printf("two prompts in one batch vs alone: max |dlogit| = %.3g\n", worst);
  EXPECT_LE(worst, kBatchTolerance);
}

TEST(StoriesBatchTest, DecodeMixedWithPrefillEqualsSeparateRuns) {
  KEEL_REQUIRE_SHARED();
  Runner r(stories("stories260K.gguf"));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Separate: A prefilled then one decode step; B prefilled alone.
  r.feed(kPromptA, 0);
  const std::vector<float> decode_alone = r.feed({432}, 0, 5);
  const std::vector<float> prefill_alone = r.feed(kPromptB, 1);
  // Mixed: A prefilled in sequence 2; then one batch with A's decode step and B's whole prefill.
  r.feed(kPromptA, 2);
  Batch b = r.batch();
  b.add(432, 5, 2, true);
  for (size_t i = 0; i < kPromptB.size(); ++i) {
    b.add(kPromptB[i], static_cast<int32_t>(i), 3, i + 1 == kPromptB.size());
  }
  std::vector<float> logits;
  ASSERT_TRUE(r.forward(b, &logits).ok());
  ASSERT_EQ(logits.size(), 2u * 512);
  const double d_decode = max_abs_diff(logits.data(), decode_alone.data(), 512);
  const double d_prefill =
      max_abs_diff(logits.data() + 512, prefill_alone.data() + prefill_alone.size() - 512, 512);
  std::printf("mixed batch vs separate: decode %.3g, prefill %.3g\n", d_decode, d_prefill);
  EXPECT_LE(d_decode, kBatchTolerance);
  EXPECT_LE(d_prefill, kBatchTolerance);
}

}  // namespace
}  // namespace keel::model::testing
