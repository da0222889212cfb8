// RoPE scaling against llama.cpp on the same files: `keel make-model` writes a dense tiny shape
// with YaRN (factor 4 over an original context of 64, so the 300-token prompts run well past it)
// or linear scaling in the GGUF, llama-server (the reference binary) generates greedily with its
// top log-probabilities, and keel's forward pass, fed the same tokens, must give every reported
// token's log-probability within 1e-3 and llama.cpp's greedy token wherever its top-2 margin is
// clear; keel's own free-running greedy generation must then equal llama.cpp's tokens. Skipped,
// saying so, without the shared directory; a shared directory without the reference llama-server
// fails.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdio>

#include "cli_runner.h"
#include "llama_cpp_compare.h"
#include "llama_server.h"
#include "support/test_support.h"
#include "test_util.h"

namespace keel::testing {
namespace {

using model::testing::Runner;
using nlohmann::json;

constexpr int kSteps = 32;
constexpr int kPromptLen = 300;

// Token ids of the stories260K vocabulary: BOS, then normal tokens (259..511) in a fixed
// pseudo-random order.
std::vector<int32_t> long_prompt(uint32_t seed) {
  std::vector<int32_t> p = {1};
  uint32_t x = seed;
  while (p.size() < kPromptLen) {
    x = x * 1664525u + 1013904223u;
    p.push_back(259 + static_cast<int32_t>((x >> 8) % 253));
  }
  return p;
}

struct Case {
  const char* name;
  const char* arch;      // llama (adjacent pairs) or qwen3 (NeoX pairs, QK norm)
  const char* scaling;   // --rope-scaling
  const char* factor;    // --rope-scale
  const char* orig_ctx;  // --rope-orig-ctx ("" = not given)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class RopeScalingLlamaCppTest : public ::testing::TestWithParam<Case> {};

TEST_P(RopeScalingLlamaCppTest, LogprobsAndGreedyTokensMatch) {
  KEEL_REQUIRE_SHARED();
  ASSERT_FALSE(llama_server_binary().empty())
      << "the shared directory has no reference/llama.cpp/bin/llama-server";
  const Case& p = GetParam();
  const std::string path = make_temp_dir("rope-ref") + "/" + p.name + ".gguf";
  std::vector<std::string> args = {"make-model",
                                   "--shape",
                                   "tiny",
                                   "--arch",
                                   p.arch,
                                   "--vocab",
                                   shared_path("models/stories260K/stories260K.gguf"),
                                   "--ctx",
                                   "1024",
                                   "--rope-scaling",
                                   p.scaling,
                                   "--rope-scale",
                                   p.factor,
                                   "-o",
                                   path};
  if (*p.orig_ctx != '\0') args.insert(args.end() - 2, {"--rope-orig-ctx", p.orig_ctx});
  const CliResult made = run_keel(args);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  LlamaServer llama(path);
  ASSERT_TRUE(llama.ok()) << llama.log();
  Runner keel(path, {}, 1, 512, {.n_seqs = 4});
  ASSERT_TRUE(keel.ok()) << keel.status().to_string();
  const std::vector<std::vector<int32_t>> prompts = {long_prompt(7), long_prompt(8)};
  LlamaCppComparison c;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const json probs = llama_cpp_greedy(llama.port(), prompts[i], kSteps, 8);
    compare_with_llama_cpp(keel, static_cast<int32_t>(i), prompts[i], probs, 1e-3, &c);
  }
  // Free-running: keel's own greedy tokens from the same prompts, on fresh sequences.
  std::vector<int32_t> keel_tokens;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::vector<int32_t> gen =
        keel.greedy(prompts[i], kSteps, static_cast<int32_t>(prompts.size() + i));
    keel_tokens.insert(keel_tokens.end(), gen.begin(), gen.end());
  }
  std::printf(
      "%s vs llama.cpp: %d greedy steps after %d-token prompts, max |dlogprob| = %.3g, "
      "greedy agrees on %d of %d clear steps, free-running greedy %s\n",
      p.name, c.steps, kPromptLen, c.worst, c.greedy_agree, c.clear_steps,
      keel_tokens == c.llama_tokens ? "identical" : "DIFFERS");
  EXPECT_EQ(c.steps, 2 * kSteps) << "llama.cpp stopped early";
  EXPECT_LE(c.worst, 1e-3);
  EXPECT_EQ(c.greedy_agree, c.clear_steps);
  EXPECT_EQ(keel_tokens, c.llama_tokens);
}

INSTANTIATE_TEST_SUITE_P(Scalings, RopeScalingLlamaCppTest,
                         ::testing::Values(Case{"qwen3_yarn4_orig64", "qwen3", "yarn", "4", "64"},
                                           Case{"llama_yarn4_orig64", "llama", "yarn", "4", "64"},
                                           Case{"llama_linear4", "llama", "linear", "4", ""}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace keel::testing
