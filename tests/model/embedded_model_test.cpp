// The benchmark fixture of `keel make-model --embed` on the small test shape tiny-gqa (256 wide,
// 8 layers, groups of 4 at head size 8): in F32 its greedy text is stories260K's; quantized
// bodies load and run; the residual stays zero outside stories260K's 64 dimensions; the tensors
// are laid out as embedded_model.h says; bad input is refused with a precise message.
#include "model/embedded_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "gguf/reader.h"
#include "support/test_support.h"
#include "test_util.h"

namespace keel::model::testing {
namespace {

using nlohmann::json;

std::string stories_path(const std::string& rel) {
  return keel::testing::shared_path("models/stories260K/" + rel);
}

// Writes each (type) fixture once per test binary run.
class EmbeddedModelTest : public ::testing::Test {
 protected:
  static std::string fixture(DType type) {
    static std::map<DType, std::string> written;
    static const std::string dir = keel::testing::make_temp_dir("embedded_model");
    auto it = written.find(type);
    if (it != written.end()) return it->second;
    EmbedModelSpec spec;
    spec.embed_path = stories_path("stories260K.gguf");
    spec.shape = *find_model_shape("tiny-gqa");
    spec.weight_type = type;
    const std::string path = dir + "/fixture-" + std::string(dtype_name(type)) + ".gguf";
    ThreadPool pool(2);
    const Status s = write_embedded_model(spec, path, pool);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return written[type] = path;
  }

  // The four prompts of greedy.json with text, and stories260K's 64 greedy ids after each.
  static std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> prompts() {
    const json ref = json::parse(keel::testing::read_file(stories_path("reference/greedy.json")),
                                 nullptr, /*allow_exceptions=*/false);
    std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> out;
    for (const json& item : ref["results"]) {
      if (item["prompt"].get<std::string>().empty()) continue;
      out.emplace_back(item["prompt_ids"].get<std::vector<int32_t>>(),
                       item["gen_ids"].get<std::vector<int32_t>>());
    }
    return out;
  }

  // The final normed hidden rows of `tokens` fed from position 0.
  static std::vector<float> hidden(Runner& r, const std::vector<int32_t>& tokens) {
    Batch b = r.batch();
    for (size_t i = 0; i < tokens.size(); ++i) b.add(tokens[i], static_cast<int32_t>(i), 0, true);
    Context ctx(r.model(), static_cast<int64_t>(tokens.size()));
    std::vector<float> h;
    const Status s = ctx.forward_hidden(b, r.storage(), r.ops(), &h);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return h;
  }

  // Every value of the final hidden rows but stories260K's 64 residual dimensions (every
  // `stride`-th from 0) is exactly 0.
  static void expect_residual_in_real_slots(Runner& r, const std::vector<int32_t>& tokens,
                                            size_t stride) {
    const std::vector<float> h = hidden(r, tokens);
    const auto n_embd = static_cast<size_t>(r.model().hparams().n_embd);
    ASSERT_EQ(h.size(), tokens.size() * n_embd);
    size_t non_zero_real = 0;
    for (size_t i = 0; i < h.size(); ++i) {
      const size_t dim = i % n_embd;
      if (dim % stride != 0 || dim / stride >= 64) {
        ASSERT_EQ(h[i], 0.0f) << "token " << i / n_embd << ", dimension " << dim;
      } else if (h[i] != 0.0f) {
        ++non_zero_real;
      }
    }
    EXPECT_GT(non_zero_real, tokens.size() * 32);
  }
};

TEST_F(EmbeddedModelTest, F32GreedyTextIsStories260Ks) {
  KEEL_REQUIRE_SHARED();
  Runner r(fixture(DType::kF32));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.n_vocab(), 512);
  const auto cases = prompts();
  ASSERT_EQ(cases.size(), 4u);
  for (const auto& [prompt, expected] : cases) {
    const std::vector<int32_t> want(expected.begin(), expected.begin() + 32);
    EXPECT_EQ(r.greedy(prompt, 32), want) << "prompt of " << prompt.size() << " tokens";
  }
}

// Logits after each prompt equal stories260K's up to F32 rounding (observed: ≈ 1e-5).
TEST_F(EmbeddedModelTest, F32LogitsEqualStories260KsUpToRounding) {
  KEEL_REQUIRE_SHARED();
  Runner fixture_runner(fixture(DType::kF32));
  Runner stories(stories_path("stories260K.gguf"));
  ASSERT_TRUE(fixture_runner.ok() && stories.ok());
  double worst = 0;
  for (const auto& [prompt, expected] : prompts()) {
    const double d = max_abs_diff(fixture_runner.feed(prompt, 0), stories.feed(prompt, 0));
    worst = std::max(worst, d);
  }
  std::printf("fixture (F32 tiny-gqa) vs stories260K, every prompt position: max |dlogit| %.3g\n",
              worst);
  EXPECT_LE(worst, 1e-3);
}

TEST_F(EmbeddedModelTest, ResidualStaysInStories260KsDimensions) {
  KEEL_REQUIRE_SHARED();
  const std::vector<int32_t> tokens = prompts()[1].first;
  for (DType type : {DType::kF32, DType::kQ4_0}) {
    Runner r(fixture(type));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    SCOPED_TRACE(dtype_name(type));
    expect_residual_in_real_slots(r, tokens, 4);  // 256 wide: every 4th dimension
  }
}

// Perplexity as llama-perplexity computes it (reference/perplexity.json): the ids in 128-token
// chunks, each chunk's first id replaced by BOS, the second half of each chunk scored.
double chunked_perplexity(Runner& r, const std::vector<int32_t>& ids) {
  constexpr size_t kChunk = 128;
  const auto n_vocab = static_cast<size_t>(r.n_vocab());
  double nll = 0;
  int64_t scored = 0;
  for (size_t c = 0; c + kChunk <= ids.size(); c += kChunk) {
    std::vector<int32_t> chunk(ids.begin() + static_cast<std::ptrdiff_t>(c),
                               ids.begin() + static_cast<std::ptrdiff_t>(c + kChunk));
    chunk[0] = 1;
    const std::vector<float> logits = r.feed(chunk, 0);
    for (size_t j = kChunk / 2; j + 1 < kChunk; ++j) {
      const float* l = logits.data() + j * n_vocab;
      const double top = *std::max_element(l, l + n_vocab);
      double sum = 0;
      for (size_t v = 0; v < n_vocab; ++v) sum += std::exp(double{l[v]} - top);
      nll += top + std::log(sum) - l[static_cast<size_t>(chunk[j + 1])];
      ++scored;
    }
  }
  return std::exp(nll / static_cast<double>(scored));
}

std::vector<int32_t> reference_text_ids() {
  const json ref =
      json::parse(keel::testing::read_file(stories_path("reference/perplexity.json")), nullptr,
                  /*allow_exceptions=*/false);
  return ref["token_ids"].get<std::vector<int32_t>>();
}

// stories260K's reference text: the F32 fixture's perplexity is stories260K's (3.3342, as
// llama.cpp's with an F32 KV cache); Q8_0's within 1 % of it (observed +0.05 %); Q4_0's within
// 12 % (observed +9.9 %: at width 256 a 32-value block of the residual holds 8 real dimensions;
// at TinyLlama's width, one per block, +3.5 %, docs/benchmarks.md).
TEST_F(EmbeddedModelTest, PerplexityOnTheReferenceTextIsStories260Ks) {
  KEEL_REQUIRE_SHARED();
  const std::vector<int32_t> ids = reference_text_ids();
  ASSERT_EQ(ids.size(), 791u);
  Runner stories(stories_path("stories260K.gguf"), {}, 1, 128);
  Runner f32(fixture(DType::kF32), {}, 1, 128);
  Runner q8(fixture(DType::kQ8_0), {}, 1, 128);
  Runner q4(fixture(DType::kQ4_0), {}, 1, 128);
  ASSERT_TRUE(stories.ok() && f32.ok() && q8.ok() && q4.ok());
  const double own = chunked_perplexity(stories, ids);
  const double embedded = chunked_perplexity(f32, ids);
  const double q8_ppl = chunked_perplexity(q8, ids), q4_ppl = chunked_perplexity(q4, ids);
  std::printf(
      "perplexity on ppl_text.txt: stories260K %.4f; fixtures F32 %.4f, Q8_0 %.4f "
      "(%+.2f %%), Q4_0 %.4f (%+.2f %%)\n",
      own, embedded, q8_ppl, 100.0 * (q8_ppl / own - 1.0), q4_ppl, 100.0 * (q4_ppl / own - 1.0));
  EXPECT_NEAR(own, 3.3342, 5e-4);
  EXPECT_NEAR(embedded, own, 1e-4);
  EXPECT_LE(std::fabs(q8_ppl / own - 1.0), 0.01);
  EXPECT_LE(std::fabs(q4_ppl / own - 1.0), 0.12);
}

// A measurement hook, skipped unless KEEL_EMBED_PPL_MODEL names a fixture (how
// docs/benchmarks.md measured the TinyLlama-shape ones, on 2 threads): its perplexity on the
// reference text within 5 % of stories260K's (issue 37's target for a Q4_0 fixture).
TEST_F(EmbeddedModelTest, PerplexityOfTheFixtureNamedByTheEnvironment) {
  KEEL_REQUIRE_SHARED();
  const char* path = std::getenv("KEEL_EMBED_PPL_MODEL");
  if (path == nullptr) GTEST_SKIP() << "set KEEL_EMBED_PPL_MODEL=FIXTURE.gguf to measure one";
  Runner stories(stories_path("stories260K.gguf"), {}, 1, 128);
  Runner fixture_runner(path, {}, 2, 128);
  ASSERT_TRUE(stories.ok() && fixture_runner.ok()) << fixture_runner.status().to_string();
  const std::vector<int32_t> ids = reference_text_ids();
  const double own = chunked_perplexity(stories, ids);
  const double ppl = chunked_perplexity(fixture_runner, ids);
  std::printf("perplexity on ppl_text.txt: stories260K %.4f, %s %.4f (%+.2f %%)\n", own, path, ppl,
              100.0 * (ppl / own - 1.0));
  EXPECT_LE(std::fabs(ppl / own - 1.0), 0.05);
}

// Q8_0 and Q4_0 bodies load and run; their text starts as stories260K's (quantization moves later
// tokens). Observed: Q8_0 32 / 32 ids equal on every prompt, Q4_0 at least 8.
TEST_F(EmbeddedModelTest, QuantizedFixturesLoadAndRun) {
  KEEL_REQUIRE_SHARED();
  const auto cases = prompts();
  for (const auto& [type, min_prefix] : {std::pair{DType::kQ8_0, 8}, std::pair{DType::kQ4_0, 4}}) {
    Runner r(fixture(type));
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.model().weights().layers[0].wq.dtype, type);
    for (const auto& [prompt, expected] : cases) {
      const std::vector<int32_t> got = r.greedy(prompt, 32);
      size_t same = 0;
      while (same < got.size() && got[same] == expected[same]) ++same;
      std::printf("%s fixture: %zu of 32 greedy ids equal stories260K's before the first change\n",
                  std::string(dtype_name(type)).c_str(), same);
      EXPECT_GE(same, static_cast<size_t>(min_prefix)) << dtype_name(type);
    }
  }
}

// The F32 file: stories260K's vocabulary and dimensions at head size 8, real layers interleaved
// with identity layers, zeros where the construction says, random rows elsewhere.
TEST_F(EmbeddedModelTest, TensorsAreLaidOutAsDocumented) {
  KEEL_REQUIRE_SHARED();
  auto f = gguf::GgufFile::open(fixture(DType::kF32));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(*f->get_int("llama.attention.head_count"), 32);
  EXPECT_EQ(*f->get_int("llama.attention.head_count_kv"), 8);
  EXPECT_NEAR(*f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5 / 4, 1e-12);
  EXPECT_TRUE(*f->get_bool("keel.benchmark_fixture"));
  EXPECT_EQ(f->find("keel.random_weights"), nullptr);
  const gguf::Array* layers = *f->get_array("keel.embedded_layers");
  std::vector<int64_t> real;
  for (const auto& v : layers->items) real.push_back(*v.as_int());
  EXPECT_EQ(real, (std::vector<int64_t>{0, 1, 3, 4, 6}));
  auto row = [&](const std::string& name, int64_t r) {
    const gguf::TensorInfo* t = f->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    const auto* v = reinterpret_cast<const float*>(f->tensor_data(*t).data());
    return std::vector<float>(v + r * t->shape[0], v + (r + 1) * t->shape[0]);
  };
  auto zeros = [](const std::vector<float>& v, size_t from, size_t to) {
    return std::all_of(v.begin() + from, v.begin() + to, [](float x) { return x == 0.0f; });
  };
  for (int64_t r = 0; r < 256; ++r) {  // identity layers 2, 5, 7 write nothing
    for (const char* layer : {"blk.2.", "blk.5.", "blk.7."}) {
      EXPECT_TRUE(zeros(row(std::string(layer) + "attn_output.weight", r), 0, 256));
      EXPECT_TRUE(zeros(row(std::string(layer) + "ffn_down.weight", r), 0, 512));
    }
  }
  // Residual dimension i is the body's 4i (256 / 64).
  EXPECT_FALSE(zeros(row("blk.3.attn_output.weight", 4), 0, 8));    // head 0 → head 0
  EXPECT_TRUE(zeros(row("blk.3.attn_output.weight", 4), 16, 32));   // heads 2, 3: not real
  EXPECT_FALSE(zeros(row("blk.3.attn_output.weight", 4), 32, 40));  // head 2 → head 4
  EXPECT_TRUE(zeros(row("blk.3.attn_output.weight", 5), 0, 256));   // not a real dimension
  const std::vector<float> embd = row("token_embd.weight", 300);
  const std::vector<float> q_real = row("blk.0.attn_q.weight", 8 * 5 + 3);  // stories head 3
  const std::vector<float> q_random = row("blk.0.attn_q.weight", 8 * 2);    // head 2: random
  for (size_t c = 0; c < 256; ++c) {
    EXPECT_EQ(embd[c] == 0.0f, c % 4 != 0) << c;
    EXPECT_EQ(q_real[c] == 0.0f, c % 4 != 0) << c;  // no random values beside real ones
    EXPECT_NE(q_random[c], 0.0f) << c;
  }
  const gguf::TensorInfo* norm = f->find_tensor("blk.0.attn_norm.weight");
  const auto* norm_w = reinterpret_cast<const float*>(f->tensor_data(*norm).data());
  auto stories = gguf::GgufFile::open(stories_path("stories260K.gguf"));
  ASSERT_TRUE(stories.ok());
  const auto* real_w = reinterpret_cast<const float*>(
      stories->tensor_data(*stories->find_tensor("blk.0.attn_norm.weight")).data());
  EXPECT_EQ(norm_w[4 * 7], real_w[7] * 0.5f);                     // × √(64/256)
  EXPECT_TRUE(zeros(row("blk.0.ffn_gate.weight", 172), 0, 256));  // FFN padding rows
  EXPECT_TRUE(zeros(row("blk.0.ffn_up.weight", 191), 0, 256));
  EXPECT_FALSE(zeros(row("blk.0.ffn_up.weight", 192), 0, 256));  // random after the block
  EXPECT_FALSE(zeros(row("blk.2.ffn_up.weight", 172), 0, 256));  // identity layer: random
}

// Q4_K blocks hold 256 values: a real row's 64 values are followed by 192 zeros, and stories260K's
// 172 FFN rows by 84 zero rows, so no block mixes real and random values.
TEST_F(EmbeddedModelTest, KQuantBodiesPadTheirRealPartsToWholeBlocks) {
  KEEL_REQUIRE_SHARED();
  auto f = gguf::GgufFile::open(fixture(DType::kQ4_K));
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  auto row = [&](const std::string& name, int64_t r) {
    const gguf::TensorInfo* t = f->find_tensor(name);
    EXPECT_NE(t, nullptr) << name;
    const size_t bytes = dtype_row_bytes(t->dtype, t->shape[0]);
    std::vector<float> v(static_cast<size_t>(t->shape[0]));
    kernels::dequantize_row(t->dtype, f->tensor_data(*t).data() + r * bytes, v.data(), t->shape[0]);
    return v;
  };
  auto count_zeros = [](const std::vector<float>& v, size_t from, size_t to) {
    return std::count(v.begin() + from, v.begin() + to, 0.0f);
  };
  const std::vector<float> q_real = row("blk.1.attn_q.weight", 0);  // stories head 0
  EXPECT_EQ(count_zeros(q_real, 64, 256), 192);
  EXPECT_LT(count_zeros(q_real, 0, 64), 16);
  EXPECT_EQ(count_zeros(row("blk.1.ffn_gate.weight", 200), 0, 256), 256);
  EXPECT_LT(count_zeros(row("blk.1.ffn_gate.weight", 256), 0, 256), 64);
  Runner r(fixture(DType::kQ4_K));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_residual_in_real_slots(r, prompts()[0].first, 1);  // packed: the first 64
}

TEST_F(EmbeddedModelTest, BadInputIsRefusedWithAPreciseMessage) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = keel::testing::make_temp_dir("embedded_model_bad");
  ThreadPool pool(1);
  RandomModelSpec qwen;
  qwen.arch = "qwen3";
  qwen.shape = *find_model_shape("tiny");
  ASSERT_TRUE(write_random_model(qwen, dir + "/qwen3.gguf", pool).ok());
  EmbedModelSpec spec;
  spec.embed_path = dir + "/qwen3.gguf";
  spec.shape = *find_model_shape("tiny-gqa");
  Status s = write_embedded_model(spec, dir + "/out.gguf", pool);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), dir +
                             "/qwen3.gguf has architecture 'qwen3'; --embed takes a dense llama "
                             "model");
  spec.embed_path = stories_path("stories260K.gguf");
  spec.shape.name = "narrow";
  spec.shape.n_embd = 32;
  s = write_embedded_model(spec, dir + "/out.gguf", pool);
  EXPECT_EQ(s.message(), "shape 'narrow' is 32 wide, narrower than stories260K.gguf's 64");
  spec.shape = *find_model_shape("tiny-gqa");
  spec.shape.n_head_kv = 4;
  s = write_embedded_model(spec, dir + "/out.gguf", pool);
  EXPECT_EQ(s.message().rfind("head-count mismatch: shape 'tiny-gqa' at head size 8 has 32 "
                              "query heads over 32 KV heads (groups of 1)",
                              0),
            0u)
      << s.message();
  spec.embed_path = dir + "/missing.gguf";
  EXPECT_EQ(write_embedded_model(spec, dir + "/out.gguf", pool).code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir + "/out.gguf"));
}

}  // namespace
}  // namespace keel::model::testing
