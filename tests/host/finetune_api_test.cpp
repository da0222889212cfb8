// keel serve's fine-tuning API in one process on stories260K, as `keel serve` composes it: an
// EngineHost (the engine), a FinetuneBackend (the CPU LoRA trainer) and a real Server over HTTP.
// A job paused mid-run and resumed reports the same per-step losses as an undisturbed job with the
// same seed (within 1e-6); both run one after the other (the second queued); the fine-tuned model
// and its checkpoints answer chat requests by name; a bad training line fails the job with the
// line named; an unknown file is 404.
#include "host/finetune_backend.h"

#include <gtest/gtest.h>

#include <thread>

#include "../engine/engine_test_util.h"
#include "../server/batch_test_client.h"
#include "../server/test_http_client.h"
#include "host/engine_host.h"
#include "server/chat_formatter.h"
#include "server/server.h"

namespace keel::host {
namespace finetune_api_test {

using Json = nlohmann::json;
using server::testing::http_request;
using server::testing::post_json;

// The trainer's learning test's conversations (tests/train/finetune_test.cpp), in ChatML (the
// fallback template of a GGUF without one).
std::string conversations() {
  const char* const qa[][2] = {
      {"Who found the ball?", "Tom found the red ball under the big tree in the park."},
      {"What did the cat eat?", "The little cat ate a fish and then went to sleep in the sun."},
      {"Where is the dog?", "The dog is in the garden. He is digging a hole to hide his bone."},
      {"Why was Lily sad?", "Lily was sad because her kite flew away into the sky."},
      {"What did Ben build?", "Ben built a tall tower with blue blocks, and it did not fall."},
      {"Who has a new hat?", "Mom has a new hat. It is pink and has a yellow flower on it."},
  };
  std::string out;
  for (const auto& c : qa) {
    out +=
        Json(
            {{"messages",
              {{{"role", "user"}, {"content", c[0]}}, {{"role", "assistant"}, {"content", c[1]}}}}})
            .dump() +
        "\n";
  }
  return out;
}

struct Stack {
  std::unique_ptr<EngineHost> host;
  std::unique_ptr<FinetuneBackend> tuner;
  std::unique_ptr<server::Server> server;

  Stack() {
    auto opened = EngineHost::open(KEEL_REPO_STORIES);
    EXPECT_TRUE(opened.ok()) << opened.error().to_string();
    host = std::move(*opened);
    tuner = std::make_unique<FinetuneBackend>(
        FinetuneBackend::Options{KEEL_REPO_STORIES, &host->tokenizer(), host->chat_template(), 2});
    server::ServerConfig c;
    c.host = "127.0.0.1";
    c.port = 0;
    c.served_model_name = "stories";
    server::ServerDeps deps{
        host->client(), &host->tokenizer(),
        server::template_chat_formatter(host->chat_template(), &host->tokenizer()), host->ready()};
    deps.fine_tuner = tuner.get();
    auto started = server::Server::start(c, std::move(deps));
    EXPECT_TRUE(started.ok()) << started.status().to_string();
    server = std::move(*started);
    StartOptions start;
    start.compute = {kernels::best_isa(detect_cpu_features()), 1};
    start.engine = engine::base_config();
    EXPECT_TRUE(host->start(std::move(start)).ok());
  }
  ~Stack() {
    if (server) server->shutdown();
  }
  uint16_t port() const { return server->port(); }
};

Json job(uint16_t port, const std::string& id) {
  return http_request(port, "GET", "/v1/fine_tuning/jobs/" + id).json();
}

template <typename Pred>
Json wait_job(uint16_t port, const std::string& id, Pred pred) {
  // Generous: the trainer runs at idle priority, so a busy machine (ctest -j) slows it down.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  Json j = job(port, id);
  while (!pred(j) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    j = job(port, id);
  }
  return j;
}

std::vector<Json> events(uint16_t port, const std::string& id) {
  Json page = http_request(port, "GET", "/v1/fine_tuning/jobs/" + id + "/events?limit=1000").json();
  return std::vector<Json>(page["data"].rbegin(), page["data"].rend());
}

// train_loss by step, from the metrics events.
std::vector<double> losses(uint16_t port, const std::string& id) {
  std::vector<double> out;
  for (const Json& e : events(port, id)) {
    if (e["type"] != "metrics") continue;
    EXPECT_EQ(e["data"]["step"], static_cast<int64_t>(out.size()) + 1);
    out.push_back(e["data"]["train_loss"]);
  }
  return out;
}

TEST(FinetuneApiTest, PausedAndResumedJobRepeatsTheUndisturbedLosses) {
  Stack s;
  ASSERT_NE(s.server, nullptr);
  server::testing::HttpResult up = server::testing::upload(s.port(), conversations(), "fine-tune");
  ASSERT_EQ(up.status, 200) << up.body;
  const Json body = {{"model", "stories"},
                     {"training_file", up.json()["id"]},
                     {"seed", 11},
                     {"suffix", "qa"},
                     {"hyperparameters", {{"n_epochs", 3}, {"learning_rate_multiplier", 10}}}};
  const std::string whole = post_json(s.port(), "/v1/fine_tuning/jobs", body).json()["id"];
  const std::string paused = post_json(s.port(), "/v1/fine_tuning/jobs", body).json()["id"];
  EXPECT_EQ(
      wait_job(s.port(), paused, [](const Json& j) { return j["status"] == "queued"; })["status"],
      "queued");
  // The second job starts once the first is done; pause it after a few steps.
  Json p = wait_job(s.port(), paused, [&](const Json& j) {
    return j["status"] == "running" && events(s.port(), paused).size() > 0 &&
           losses(s.port(), paused).size() >= 3;
  });
  ASSERT_EQ(p["status"], "running") << p.dump();
  EXPECT_EQ(job(s.port(), whole)["status"], "succeeded");
  server::testing::HttpResult r =
      http_request(s.port(), "POST", "/v1/fine_tuning/jobs/" + paused + "/pause");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["status"], "paused");
  wait_job(s.port(), paused, [&](const Json&) {
    for (const Json& e : events(s.port(), paused)) {
      if (e["message"].get<std::string>().starts_with("Training stopped at step")) return true;
    }
    return false;
  });
  const size_t at_pause = losses(s.port(), paused).size();
  EXPECT_LT(at_pause, 18u);  // stopped before its end
  r = http_request(s.port(), "POST", "/v1/fine_tuning/jobs/" + paused + "/resume");
  ASSERT_EQ(r.status, 200) << r.body;
  const Json done =
      wait_job(s.port(), paused, [](const Json& j) { return j["status"] == "succeeded"; });
  ASSERT_EQ(done["status"], "succeeded") << done.dump();

  const std::vector<double> a = losses(s.port(), whole), b = losses(s.port(), paused);
  ASSERT_EQ(a.size(), 18u);  // 6 conversations × 3 epochs
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << "step " << i + 1;
  EXPECT_LT(a.back(), a.front());
  EXPECT_EQ(job(s.port(), whole)["trained_tokens"], done["trained_tokens"]);

  // The fine-tuned model and a checkpoint answer by name.
  const Json ckpts =
      http_request(s.port(), "GET", "/v1/fine_tuning/jobs/" + paused + "/checkpoints").json();
  ASSERT_EQ(ckpts["data"].size(), 3u);
  EXPECT_GT(ckpts["data"][0]["metrics"]["train_loss"].get<double>(), 0.0);
  for (const std::string& model :
       {done["fine_tuned_model"].get<std::string>(),
        ckpts["data"][1]["fine_tuned_model_checkpoint"].get<std::string>()}) {
    server::testing::HttpResult chat =
        post_json(s.port(), "/v1/chat/completions",
                  {{"model", model},
                   {"messages", {{{"role", "user"}, {"content", "Who found the ball?"}}}},
                   {"max_tokens", 8},
                   {"temperature", 0}});
    EXPECT_EQ(chat.status, 200) << model << ": " << chat.body;
  }
}

TEST(FinetuneApiTest, BadLineFailsTheJobAndUnknownFileIs404) {
  Stack s;
  ASSERT_NE(s.server, nullptr);
  const std::string text =
      conversations() + R"({"messages": [{"role": "user", "content": "no answer"}]})" + "\n";
  const std::string file = server::testing::upload(s.port(), text, "fine-tune").json()["id"];
  server::testing::HttpResult r =
      post_json(s.port(), "/v1/fine_tuning/jobs", {{"model", "stories"}, {"training_file", file}});
  ASSERT_EQ(r.status, 200) << r.body;
  const Json failed = wait_job(s.port(), r.json()["id"], [](const Json& j) {
    return j["status"] == "failed" || j["status"] == "succeeded";
  });
  ASSERT_EQ(failed["status"], "failed") << failed.dump();
  EXPECT_EQ(failed["error"]["code"], "invalid_training_file");
  EXPECT_EQ(failed["error"]["param"], "training_file");
  const std::string message = failed["error"]["message"];
  EXPECT_NE(message.find("line 7"), std::string::npos) << message;

  r = post_json(s.port(), "/v1/fine_tuning/jobs",
                {{"model", "stories"}, {"training_file", "file-nope"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.json()["error"]["code"], "file_not_found");
}

}  // namespace finetune_api_test
}  // namespace keel::host
