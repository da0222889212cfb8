// The LoRA routes over real HTTP against the fake engine (lora_routes.h): load / unload as vLLM
// (200 text, 400 for a missing field, a duplicate or a bad file, 404 for an unknown name), off
// without --allow-runtime-lora (404 naming the flag); GET /v1/models lists adapters with parent =
// the served model; `model` = an adapter's name reaches the engine as GenerationRequest::lora
// (the served name: none), an unknown name is 404, and a context cache refuses an adapter.
#include <gtest/gtest.h>

#include "server_harness.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;

ServerConfig lora_config() {
  ServerConfig c = test_config();
  c.allow_runtime_lora = true;
  return c;
}

class LoraHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    h_.engine().set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello, kWorld};
      return s;
    });
  }
  HttpResult load(const Json& body) { return post_json(h_.port(), "/v1/load_lora_adapter", body); }
  HttpResult unload(const Json& body) {
    return post_json(h_.port(), "/v1/unload_lora_adapter", body);
  }
  static void expect_error(const HttpResult& r, int status, const std::string& part) {
    EXPECT_EQ(r.status, status) << r.body;
    const std::string message = r.json()["error"]["message"];
    EXPECT_NE(message.find(part), std::string::npos) << message;
  }
  ServerHarness h_{lora_config()};
};

TEST_F(LoraHttpTest, LoadListSelectUnload) {
  HttpResult r = load({{"lora_name", "sql"}, {"lora_path", "/adapters/sql.gguf"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' added successfully.");

  HttpResult models = http_request(h_.port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  const Json data = models.json()["data"];
  ASSERT_EQ(data.size(), 2u);
  EXPECT_EQ(data[0]["id"], "test-model");
  EXPECT_EQ(data[1]["id"], "sql");
  EXPECT_EQ(data[1]["parent"], "test-model");
  EXPECT_EQ(data[1]["root"], "/adapters/sql.gguf");
  EXPECT_EQ(data[1]["lora"]["rank"], 8);
  HttpResult one = http_request(h_.port(), "GET", "/v1/models/sql");
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(one.json()["parent"], "test-model");

  for (const char* model : {"sql", "test-model"}) {
    HttpResult c = post_json(h_.port(), "/v1/completions",
                             {{"model", model}, {"prompt", "Hello"}, {"max_tokens", 2}});
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.json()["model"], model);
  }
  const std::vector<engine::GenerationRequest> reqs = h_.engine().submitted();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].lora, "sql");
  EXPECT_EQ(reqs[1].lora, "");

  r = unload({{"lora_name", "sql"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, "Success: LoRA adapter 'sql' removed successfully.");
  expect_error(post_json(h_.port(), "/v1/completions", {{"model", "sql"}, {"prompt", "Hello"}}),
               404, "The model `sql` does not exist.");
  EXPECT_EQ(http_request(h_.port(), "GET", "/v1/models").json()["data"].size(), 1u);
  EXPECT_EQ(http_request(h_.port(), "GET", "/v1/models/sql").status, 404);
}

TEST_F(LoraHttpTest, Errors) {
  ASSERT_EQ(load({{"lora_name", "a"}, {"lora_path", "/a.gguf"}}).status, 200);
  expect_error(load({{"lora_name", "a"}, {"lora_path", "/b.gguf"}}), 400,
               "a LoRA adapter named 'a' is already loaded");
  expect_error(load({{"lora_name", "b"}, {"lora_path", "/bad.gguf"}}), 400,
               "/bad.gguf: not a LoRA adapter");
  expect_error(load({{"lora_path", "/b.gguf"}}), 400, "`lora_name` is required");
  expect_error(load({{"lora_name", "b"}}), 400, "`lora_path` is required");
  expect_error(load({{"lora_name", 3}, {"lora_path", "/b.gguf"}}), 400, "lora_name");
  expect_error(load({{"lora_name", "test-model"}, {"lora_path", "/b.gguf"}}), 400,
               "the base model's name");
  expect_error(unload({{"lora_name", "nope"}}), 404, "no LoRA adapter named 'nope'");
  expect_error(unload(Json::object()), 400, "`lora_name` is required");
  EXPECT_EQ(http_request(h_.port(), "GET", "/v1/load_lora_adapter").status, 405);
  expect_error(post_json(h_.port(), "/v1/completions", {{"model", "zzz"}, {"prompt", "Hello"}}),
               404, "The model `zzz` does not exist.");
  expect_error(post_json(h_.port(), "/v1/caches", {{"model", "a"}, {"prompt", "Hello"}}), 400,
               "context caches hold the base model's KV only");
}

TEST(LoraHttpOffTest, RuntimeLoadingNeedsTheFlag) {
  ServerHarness h;  // allow_runtime_lora off
  HttpResult r =
      post_json(h.port(), "/v1/load_lora_adapter", {{"lora_name", "a"}, {"lora_path", "/a"}});
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("--allow-runtime-lora"), std::string::npos) << r.body;
  EXPECT_TRUE(h.engine().list_loras().empty());
  r = post_json(h.port(), "/v1/unload_lora_adapter", {{"lora_name", "a"}});
  EXPECT_EQ(r.status, 404) << r.body;
  // An adapter loaded at start (as `--lora` does) is served either way.
  ASSERT_TRUE(h.engine().load_lora("start", "/start.gguf").ok());
  EXPECT_EQ(
      post_json(h.port(), "/v1/completions", {{"model", "start"}, {"prompt", "Hello"}}).status,
      200);
}

}  // namespace
}  // namespace keel::server::testing
