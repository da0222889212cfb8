// LoRA adapters through `keel cluster up --lora` (stories260K from ../shared): every TE serves
// the adapters named at start, the gateway lists them with their parent, a request's `model`
// selects one through gateway → JE → TE with greedy text equal to `keel serve`'s, and the JE
// hashes an adapter prompt under the adapter's prefix key — so a repeated adapter prompt is routed
// to the TE that holds its blocks, and another adapter's identical prompt matches nothing.
// Run-time loading through the gateway is refused with a 400 naming --lora.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "proc/process_supervisor.h"
#include "proc/ready_line.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

std::string make_lora(const std::string& dir, const std::string& name, const std::string& seed) {
  const std::string out = dir + "/" + name + ".gguf";
  const CliResult r = run_keel(
      {"make-lora", "-m", stories(), "-o", out, "--rank", "8", "--alpha", "16", "--seed", seed});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

json completion(int port, const std::string& model, const std::string& prompt, int max_tokens) {
  const json body = {{"model", model},
                     {"prompt", prompt},
                     {"max_tokens", max_tokens},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false);
}

int64_t matched_blocks(int port) {
  const HttpResponse r = http_request(port, "GET", "/v1/cluster/status");
  EXPECT_EQ(r.status, 200) << r.body;
  return json::parse(r.body, nullptr, false)["router"].value("matched_blocks", int64_t{-1});
}

int64_t cached_tokens(const json& response) {
  return response["usage"]["prompt_tokens_details"].value("cached_tokens", int64_t{0});
}

TEST(ClusterLoraTest, AdaptersThroughTheFleet) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = make_temp_dir("cluster-lora");
  const std::string a = make_lora(dir, "a", "1"), b = make_lora(dir, "b", "2");
  const std::vector<std::string> loras = {"--lora", "tales=" + a, "--lora", "fables=" + b};

  proc::ProcessSupervisor sup;
  proc::ChildSpec spec;
  spec.name = "cluster";
  spec.argv = {KEEL_BINARY, "cluster",
               "up",        "-m",
               stories(),   "--served-model-name",
               "stories",   "--jes",
               "1",         "--colocated",
               "2",         "--threads-per-te",
               "1",         "--port",
               "0",         "--drain-timeout",
               "10"};
  spec.argv.insert(spec.argv.end(), loras.begin(), loras.end());
  spec.ready_timeout = std::chrono::milliseconds(60000);
  Result<proc::Child> child = sup.spawn(spec);
  ASSERT_TRUE(child.ok()) << child.status().to_string();
  Result<int> port = proc::ready_port(child->ready);
  ASSERT_TRUE(port.ok()) << port.status().to_string();
  const int gw = *port;

  const json models = json::parse(http_request(gw, "GET", "/v1/models").body, nullptr, false);
  ASSERT_EQ(models["data"].size(), 3u) << models.dump();
  EXPECT_EQ(models["data"][1]["id"], "tales");
  EXPECT_EQ(models["data"][1]["parent"], "stories");
  EXPECT_EQ(models["data"][1]["root"], a);
  EXPECT_EQ(models["data"][2]["id"], "fables");
  EXPECT_EQ(models["data"][2]["lora"]["rank"], 8);

  std::vector<std::string> serve_args = {"-m",     stories(), "-t", "1", "--served-model-name",
                                         "stories"};
  serve_args.insert(serve_args.end(), loras.begin(), loras.end());
  ServeProcess serve(serve_args);
  ASSERT_TRUE(serve.ok()) << serve.error();
  std::vector<std::string> texts;
  for (const std::string model : {"stories", "tales", "fables"}) {
    const json want = completion(serve.port(), model, "Once upon a time", 24);
    const json got = completion(gw, model, "Once upon a time", 24);
    EXPECT_EQ(got["choices"][0]["text"], want["choices"][0]["text"]) << model;
    EXPECT_EQ(got["model"], model);
    texts.push_back(got["choices"][0].value("text", ""));
  }
  EXPECT_NE(texts[0], texts[1]);
  EXPECT_NE(texts[1], texts[2]);
  EXPECT_EQ(http_request(gw, "POST", "/v1/completions",
                         json{{"model", "nobody"}, {"prompt", "Hi"}}.dump())
                .status,
            404);

  // Locality under the adapter's key: the TEs' cache events for `tales` match the JE's hashes.
  std::string prompt = "The dragon flew over the hills and the children watched it";
  for (int i = 0; i < 3; ++i) prompt += " while the wind sang softly in the tall green trees";
  const int64_t before = matched_blocks(gw);
  EXPECT_EQ(cached_tokens(completion(gw, "tales", prompt, 4)), 0);
  int64_t cached = 0, after = before;
  const bool matched = eventually(
      [&] {
        cached = cached_tokens(completion(gw, "tales", prompt, 4));
        after = matched_blocks(gw);
        return after > before && cached > 0;
      },
      std::chrono::milliseconds(15000));
  EXPECT_TRUE(matched) << "matched_blocks " << before << " → " << after << ", cached " << cached;
  EXPECT_GE(cached, 16);
  // The same prompt under another adapter: other keys, no match anywhere.
  const int64_t before_b = matched_blocks(gw);
  EXPECT_EQ(cached_tokens(completion(gw, "fables", prompt, 4)), 0);
  EXPECT_EQ(matched_blocks(gw), before_b);

  HttpResponse r = http_request(gw, "POST", "/v1/load_lora_adapter",
                                json{{"lora_name", "more"}, {"lora_path", a}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("keel cluster up --lora"), std::string::npos) << r.body;
  r = http_request(gw, "POST", "/v1/unload_lora_adapter", json{{"lora_name", "tales"}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(completion(gw, "tales", "Hi", 2)["object"], "text_completion");
}

TEST(ClusterLoraTest, ABadAdapterStopsTheStart) {
  KEEL_REQUIRE_SHARED();
  const CliResult r =
      run_keel({"cluster", "up", "-m", stories(), "--port", "0", "--lora", "x=" + stories()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot load LoRA adapter 'x'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not a LoRA adapter"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace keel::testing
