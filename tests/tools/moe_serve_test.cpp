// `keel serve` on a mixture-of-experts model (qwen3moe-tiny from `keel make-model`, Q8_0): plain
// completions under continuous batching and chunked prefill (a 16-token step budget), concurrent
// greedy requests equal to one-at-a-time ones, a repeated prompt hitting the prefix cache, LoRA on
// the attention projections, n-gram speculative decoding, /metrics' per-expert token counts —
// and the same model under `keel cluster up`, its gateway summing the TEs' counts; `keel
// make-lora` refuses FFN targets of an MoE model in one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <sstream>
#include <thread>

#include "cli_runner.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string make_moe(const std::string& dir) {
  const std::string path = dir + "/qwen3moe-tiny.gguf";
  const CliResult r = run_keel(
      {"make-model", "--shape", "qwen3moe-tiny", "--type", "q8_0", "--ctx", "512", "-o", path});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return path;
}

std::string greedy_text(int port, const std::string& prompt, const std::string& lora = "",
                        const json& extra = json::object()) {
  json body = {{"model", lora.empty() ? "moe" : lora},
               {"prompt", prompt},
               {"max_tokens", 24},
               {"temperature", 0}};
  body.update(extra);
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("choices")) return "<" + r.body + ">";
  EXPECT_EQ(j["usage"]["completion_tokens"], 24) << r.body;
  return j["choices"][0]["text"].get<std::string>();
}

// keel:moe_expert_tokens_total summed per layer (label layer="N"), from /metrics text.
std::map<int, double> expert_tokens_per_layer(const std::string& metrics, int* series) {
  std::map<int, double> sums;
  std::istringstream in(metrics);
  std::string line;
  *series = 0;
  while (std::getline(in, line)) {
    if (!line.starts_with("keel:moe_expert_tokens_total{")) continue;
    const size_t at = line.find("layer=\"");
    const size_t space = line.rfind(' ');
    if (at == std::string::npos || space == std::string::npos) continue;
    sums[std::stoi(line.substr(at + 7))] += std::stod(line.substr(space + 1));
    ++*series;
  }
  return sums;
}

TEST(MoeServeTest, CompletionsBatchingChunkedPrefillPrefixCacheAndAttentionLora) {
  const std::string dir = make_temp_dir("moe-serve");
  const std::string model = make_moe(dir);
  const std::string lora = dir + "/attn.gguf";
  CliResult made = run_keel(
      {"make-lora", "-m", model, "-o", lora, "--targets", "q,v", "--rank", "4", "--alpha", "16"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  ServeProcess server({"-m", model, "-t", "1", "--served-model-name", "moe", "--max-num-seqs", "4",
                       "--max-batched-tokens", "16", "--lora", "attn=" + lora});
  ASSERT_TRUE(server.ok()) << server.error();
  const std::string long_prompt =
      "the quick brown fox jumps over the lazy dog and then runs far away into the woods";
  const std::vector<std::string> prompts = {long_prompt, "hello world", "once upon a time"};
  std::vector<std::string> alone;
  for (const std::string& p : prompts) alone.push_back(greedy_text(server.port(), p));
  EXPECT_NE(alone[0], alone[1]);
  // The same prompts at once: batched together (tokens of several sequences share each expert's
  // grouped matmul), greedy text unchanged.
  std::vector<std::string> together(prompts.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] { together[i] = greedy_text(server.port(), prompts[i]); });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(together, alone);
  // The repeated long prompt hit the prefix cache and still gave the same text.
  const std::string metrics = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_GT(metric_value(metrics, "keel:prefix_cache_hits_total"), 0.0) << metrics.substr(0, 2000);
  // n-gram speculation verifies several tokens of a sequence per step through the MoE layers:
  // greedy text unchanged.
  const json spec = {{"speculative", {{"method", "ngram"}, {"k", 4}, {"ngram_min", 1}}}};
  EXPECT_EQ(greedy_text(server.port(), long_prompt, "", spec), alone[0]);
  const std::string after = http_request(server.port(), "GET", "/metrics").body;
  EXPECT_GT(metric_value(after, "keel:spec_draft_tokens_total"), 0.0) << "nothing was drafted";
  // /metrics counts the routing: one series per (layer, expert) — qwen3moe-tiny has 2 layers of 8
  // experts, top-2 —, every layer saw the same tokens, 2 per token, at least every computed
  // prompt token's.
  int series = 0;
  const std::map<int, double> per_layer = expert_tokens_per_layer(after, &series);
  EXPECT_EQ(series, 2 * 8) << after.substr(0, 2000);
  ASSERT_EQ(per_layer.size(), 2u);
  const double layer0 = per_layer.begin()->second;
  for (const auto& [layer, tokens] : per_layer) EXPECT_EQ(tokens, layer0) << "layer " << layer;
  EXPECT_EQ(std::fmod(layer0, 2.0), 0.0);
  EXPECT_GE(layer0, 2 * metric_value(after, "keel:prompt_tokens_total"));
  // An attention-only LoRA changes the text.
  EXPECT_NE(greedy_text(server.port(), long_prompt, "attn"), alone[0]);
}

// `keel cluster up` on the MoE model (2 colocated TEs, 1 JE): greedy text equals keel serve's,
// and the gateway's /metrics sums both TEs' per-expert counts (carried in their load reports).
TEST(MoeServeTest, ClusterGreedyTextEqualsKeelServeAndTheGatewayCountsExperts) {
  const std::string dir = make_temp_dir("moe-cluster");
  const std::string model = make_moe(dir);
  ServeProcess serve({"-m", model, "-t", "1", "--served-model-name", "moe"});
  ASSERT_TRUE(serve.ok()) << serve.error();
  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {
      KEEL_BINARY, "cluster",     "up", "-m",     model, "--served-model-name", "moe", "--jes",
      "1",         "--colocated", "2",  "--port", "0",   "--threads-per-te",    "1"};
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<int> port = proc::ready_port(child->ready);
  ASSERT_TRUE(port.ok()) << port.status().message();
  const std::vector<std::string> prompts = {"hello world", "once upon a time",
                                            "the quick brown fox"};
  for (const std::string& p : prompts) {
    for (int i = 0; i < 2; ++i) {  // twice: round robin over the JE's router reaches both TEs
      EXPECT_EQ(greedy_text(*port, p), greedy_text(serve.port(), p)) << p;
    }
  }
  // The gateway's view follows the TEs' periodic reports, and one sent during a step may hold
  // part of it (layer 0 counted, layer 1 not yet): wait for reports after the requests.
  std::map<int, double> per_layer;
  int series = 0;
  double prompt_tokens = 0;
  EXPECT_TRUE(eventually([&] {
    const std::string m = http_request(*port, "GET", "/metrics").body;
    per_layer = expert_tokens_per_layer(m, &series);
    prompt_tokens = metric_value(m, "keel:prompt_tokens_total");
    return per_layer.size() == 2 && prompt_tokens > 0 &&
           per_layer.begin()->second >= 2 * prompt_tokens &&
           per_layer.begin()->second == per_layer.rbegin()->second;
  })) << "layer 0: "
      << (per_layer.empty() ? 0.0 : per_layer.begin()->second) << ", prompt tokens "
      << prompt_tokens;
  EXPECT_EQ(series, 2 * 8);
  ASSERT_EQ(per_layer.size(), 2u);
  EXPECT_EQ(per_layer.begin()->second, per_layer.rbegin()->second);
  EXPECT_TRUE(sup.stop_all(std::chrono::milliseconds(20000)).ok());
}

TEST(MoeServeTest, MakeLoraRefusesFfnTargetsOfAnMoeModel) {
  const std::string dir = make_temp_dir("moe-lora");
  const std::string model = make_moe(dir);
  const CliResult r =
      run_keel({"make-lora", "-m", model, "-o", dir + "/x.gguf", "--targets", "q,gate"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("mixture-of-experts"), std::string::npos) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace keel::testing
