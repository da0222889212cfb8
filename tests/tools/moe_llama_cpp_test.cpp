// Mixture-of-experts models against llama.cpp on the same files: `keel make-model` writes each
// family's tiny shape (F32, and one quantized type each; the stories260K vocabulary), llama-server
// generates 64 greedy tokens per prompt with its top log-probabilities, and keel's forward pass,
// fed the same tokens, must give every reported token's log-probability within 1e-3 (F32; the
// quantized files within 0.3, see Case) and the same greedy token wherever llama.cpp's top-2 margin
// is clear. Skips without the shared data or the reference binary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "llama_cpp_compare.h"
#include "llama_server.h"
#include "serve_process.h"
#include "support/test_support.h"
#include "test_util.h"

namespace keel::testing {
namespace {

using model::testing::Runner;
using nlohmann::json;

constexpr int kSteps = 64;

// Prompts as token ids of the stories260K vocabulary (BOS 1, then normal tokens).
const std::vector<std::vector<int32_t>> kPrompts = {
    {1, 403, 407, 261, 378, 300},
    {1, 320, 441, 272},
    {1, 500, 299, 350, 262, 270, 480, 411, 333, 287},
};

// Quantized files: keel and llama.cpp both quantize activations to Q8_0 / Q8_K blocks, but
// ggml's SIMD quantizer multiplies by 127/amax and rounds half to even where keel's follows
// ggml's reference (divide by amax/127, round half away): now and then one activation lands one
// step apart, and on these random models that moves a log-probability by up to ~0.2 at once. The
// dense `tiny` shape at Q8_0 shows the same (0.17 over these prompts), so it is not the MoE
// layer; quantized cases check a looser bound and greedy agreement beyond that margin.
struct Case {
  const char* shape;
  const char* type;
  double tolerance;     // max |Δ log-probability|
  double clear_margin;  // llama.cpp's top-2 margin above which keel must pick the same token
};

class MoeLlamaCppTest : public ::testing::TestWithParam<Case> {};

TEST_P(MoeLlamaCppTest, LogprobsAndGreedyTokensMatch) {
  KEEL_REQUIRE_SHARED();
  if (llama_server_binary().empty()) GTEST_SKIP() << "no reference llama-server";
  const Case& p = GetParam();
  const std::string path = make_temp_dir("moe-ref") + "/" + p.shape + ".gguf";
  const CliResult made =
      run_keel({"make-model", "--shape", p.shape, "--type", p.type, "--vocab",
                shared_path("models/stories260K/stories260K.gguf"), "--ctx", "1024", "-o", path});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  LlamaServer llama(path);
  ASSERT_TRUE(llama.ok()) << llama.log();
  Runner keel(path, {}, 1, 64, {.n_seqs = 3});
  ASSERT_TRUE(keel.ok()) << keel.status().to_string();
  ASSERT_TRUE(keel.model().hparams().is_moe());
  LlamaCppComparison c;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const json probs = llama_cpp_greedy(llama.port(), kPrompts[i], kSteps, 8);
    compare_with_llama_cpp(keel, static_cast<int32_t>(i), kPrompts[i], probs, p.clear_margin, &c);
  }
  std::printf(
      "%s %s vs llama.cpp: %d greedy steps, max |dlogprob| = %.3g, greedy agrees on %d "
      "of %d clear steps\n",
      p.shape, p.type, c.steps, c.worst, c.greedy_agree, c.clear_steps);
  EXPECT_GE(c.steps, 3 * 16) << "llama.cpp stopped early on every prompt";
  EXPECT_LE(c.worst, p.tolerance);
  EXPECT_EQ(c.greedy_agree, c.clear_steps);
}

INSTANTIATE_TEST_SUITE_P(Families, MoeLlamaCppTest,
                         ::testing::Values(Case{"qwen3moe-tiny", "f32", 1e-3, 1e-3},
                                           Case{"qwen2moe-tiny", "f32", 1e-3, 1e-3},
                                           Case{"mixtral-tiny", "f32", 1e-3, 1e-3},
                                           Case{"qwen3moe-tiny", "q4_k", 0.3, 0.3},
                                           Case{"mixtral-tiny", "q8_0", 0.3, 0.3},
                                           Case{"qwen2moe-tiny", "q4_0", 0.3, 0.3}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.shape) + "_" + info.param.type;
                           for (char& ch : n) ch = std::isalnum(ch) ? ch : '_';
                           return n;
                         });

}  // namespace
}  // namespace keel::testing
