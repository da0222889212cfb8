// `keel make-lora` and `keel serve --lora` end to end (stories260K from ../shared): random
// adapters written by the CLI, one loaded at start and one at run time, selected by `model`, listed
// by /v1/models with the served model as parent, unloaded; make-lora's and --lora's one-line
// errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "serve_process.h"
#include "support/test_support.h"

namespace keel::testing {
namespace {

using nlohmann::json;

std::string stories() { return shared_path("models/stories260K/stories260K.gguf"); }

// Alpha 2 × rank: a delta twice make-lora's default, so the adapters surely change greedy text.
std::string make_lora(const std::string& dir, const std::string& name, const std::string& seed) {
  const std::string out = dir + "/" + name + ".gguf";
  const CliResult r = run_keel(
      {"make-lora", "-m", stories(), "-o", out, "--rank", "8", "--alpha", "16", "--seed", seed});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rank 8 LoRA"), std::string::npos) << r.out;
  return out;
}

std::pair<int, std::string> complete(int port, const std::string& model) {
  const json body = {{"model", model},
                     {"prompt", "Once upon a time"},
                     {"max_tokens", 24},
                     {"temperature", 0},
                     {"ignore_eos", true}};
  const HttpResponse r = http_request(port, "POST", "/v1/completions", body.dump());
  if (r.status != 200) return {r.status, r.body};
  return {200, json::parse(r.body)["choices"][0]["text"].get<std::string>()};
}

TEST(ServeLoraTest, AdaptersAtStartAndAtRunTime) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = make_temp_dir("serve-lora");
  const std::string a = make_lora(dir, "a", "1"), b = make_lora(dir, "b", "2");
  ServeProcess server({"-m", stories(), "-t", "1", "--served-model-name", "stories", "--lora",
                       "tales=" + a, "--allow-runtime-lora"});
  ASSERT_TRUE(server.ok()) << server.error();
  const auto base = complete(server.port(), "stories");
  const auto tales = complete(server.port(), "tales");
  ASSERT_EQ(base.first, 200) << base.second;
  ASSERT_EQ(tales.first, 200) << tales.second;
  EXPECT_NE(base.second, tales.second) << "the adapter changed nothing";
  EXPECT_EQ(complete(server.port(), "tales"), tales);  // a prefix-cache hit under its own key

  const json models = json::parse(http_request(server.port(), "GET", "/v1/models").body);
  ASSERT_EQ(models["data"].size(), 2u);
  EXPECT_EQ(models["data"][1]["id"], "tales");
  EXPECT_EQ(models["data"][1]["parent"], "stories");
  EXPECT_EQ(models["data"][1]["root"], a);

  const json load = {{"lora_name", "other"}, {"lora_path", b}};
  HttpResponse r = http_request(server.port(), "POST", "/v1/load_lora_adapter", load.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const auto other = complete(server.port(), "other");
  ASSERT_EQ(other.first, 200);
  EXPECT_NE(other.second, tales.second);
  r = http_request(server.port(), "POST", "/v1/load_lora_adapter",
                   json{{"lora_name", "x"}, {"lora_path", stories()}}.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("not a LoRA adapter"), std::string::npos) << r.body;
  r = http_request(server.port(), "POST", "/v1/unload_lora_adapter",
                   json{{"lora_name", "tales"}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(complete(server.port(), "tales").first, 404);
  EXPECT_EQ(complete(server.port(), "stories"), base);
}

TEST(ServeLoraTest, OneLineErrors) {
  KEEL_REQUIRE_SHARED();
  const std::string dir = make_temp_dir("serve-lora");
  CliResult r = run_keel({"make-lora", "-m", stories(), "-o", dir + "/x.gguf", "--targets", "q,z"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "keel: unknown LoRA target 'z' (expected q, k, v, o, gate, up or down)\n");
  r = run_keel({"serve", "-m", stories(), "--lora", "nameonly"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("expected NAME=PATH"), std::string::npos) << r.err;
  r = run_keel({"serve", "-m", stories(), "--port", "0", "--lora", "x=" + dir + "/missing.gguf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot load LoRA adapter 'x'"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace keel::testing
