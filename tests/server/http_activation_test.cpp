// Held submissions (EngineClient::submit_async; the cluster gateway's activator holds requests
// while no task executor is ready) against a real Server with two io threads: many held
// requests leave /health and /v1/models fast (their latencies printed), a client that leaves
// while held gets its request aborted once it is placed, the others are served in full once the
// engine takes them, and a held stream refused at the end gets a plain 503, not a 200 stream.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "fake_engine.h"
#include "server/server.h"
#include "support/test_support.h"
#include "test_http_client.h"
#include "test_vocab.h"

namespace keel::server::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A FakeEngine behind an activator: while holding, submit_async keeps each request (its
// SubmitDone not run) and submit() blocks its caller, as a gateway does while no TE is ready;
// release() submits the held ones to the fake engine, fail_held() refuses them.
class HoldingEngine final : public engine::EngineClient {
 public:
  explicit HoldingEngine(FakeEngine* inner) : inner_(inner) {}

  void hold() {
    std::lock_guard lock(mu_);
    holding_ = true;
  }
  void release() { finish_held(std::nullopt); }
  void fail_held(Status status) { finish_held(std::move(status)); }
  // Requests held now: queued by submit_async, or blocking a submit() caller.
  [[nodiscard]] size_t num_held() const {
    std::lock_guard lock(mu_);
    return held_.size() + blocked_;
  }

  Result<engine::RequestKey> submit(engine::GenerationRequest request,
                                    std::shared_ptr<engine::OutputSink> sink) override {
    std::unique_lock lock(mu_);
    ++blocked_;
    cv_.wait(lock, [this] { return !holding_; });
    --blocked_;
    if (failure_) return *failure_;
    lock.unlock();
    return inner_->submit(std::move(request), std::move(sink));
  }
  void submit_async(engine::GenerationRequest request, std::shared_ptr<engine::OutputSink> sink,
                    SubmitDone done) override {
    {
      std::lock_guard lock(mu_);
      if (holding_) {
        held_.push_back(Held{std::move(request), std::move(sink), std::move(done)});
        return;
      }
    }
    done(inner_->submit(std::move(request), std::move(sink)));
  }
  void abort(engine::RequestKey key) override { inner_->abort(key); }
  bool release_cache(const std::string& id, const std::string& salt) override {
    return inner_->release_cache(id, salt);
  }
  [[nodiscard]] std::optional<engine::ContextCacheInfo> find_cache(
      const std::string& id, const std::string& salt) const override {
    return inner_->find_cache(id, salt);
  }
  [[nodiscard]] std::vector<engine::ContextCacheInfo> list_caches(
      const std::string& salt) const override {
    return inner_->list_caches(salt);
  }
  [[nodiscard]] engine::EngineStats stats() const override { return inner_->stats(); }
  [[nodiscard]] engine::MetricsSnapshot metrics() const override { return inner_->metrics(); }
  void drain(std::chrono::milliseconds timeout) override {
    release();
    inner_->drain(timeout);
  }
  [[nodiscard]] int64_t max_model_len() const override { return inner_->max_model_len(); }
  [[nodiscard]] int64_t max_waiting() const override { return inner_->max_waiting(); }

 private:
  struct Held {
    engine::GenerationRequest request;
    std::shared_ptr<engine::OutputSink> sink;
    SubmitDone done;
  };
  void finish_held(std::optional<Status> failure) {
    std::deque<Held> held;
    {
      std::lock_guard lock(mu_);
      holding_ = false;
      failure_ = failure;
      held.swap(held_);
    }
    cv_.notify_all();
    for (Held& h : held) {
      if (failure) {
        h.done(*failure);
      } else {
        h.done(inner_->submit(std::move(h.request), std::move(h.sink)));
      }
    }
  }

  FakeEngine* inner_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool holding_ = false;           // mu_
  std::optional<Status> failure_;  // mu_; set by fail_held()
  std::deque<Held> held_;          // mu_
  size_t blocked_ = 0;             // mu_; submit() callers waiting
};

class ActivationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_ = std::make_unique<FakeEngine>(256);
    fake_->set_tokenizer(&tokenizer_);
    fake_->set_script([](const engine::GenerationRequest&) {
      FakeScript s;
      s.tokens = {kHello, kWorld, kEos};
      return s;
    });
    engine_ = std::make_unique<HoldingEngine>(fake_.get());
    ServerConfig config;
    config.host = "127.0.0.1";
    config.port = 0;
    config.served_model_name = "test-model";
    config.io_threads = 2;
    config.shutdown_timeout_ms = 2000;
    ServerDeps deps;
    deps.engine = engine_.get();
    deps.tokenizer = &tokenizer_;
    deps.chat = chatml_tracked;
    Result<std::unique_ptr<Server>> s = Server::start(std::move(config), std::move(deps));
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    server_ = std::move(s).value();
  }
  void TearDown() override {
    if (engine_) engine_->release();
    if (server_) server_->shutdown();
  }
  uint16_t port() const { return server_->port(); }

  std::unique_ptr<FakeEngine> fake_;
  tokenizer::Tokenizer tokenizer_{make_test_tokenizer()};
  std::unique_ptr<HoldingEngine> engine_;
  std::unique_ptr<Server> server_;
};

// The p-th percentile of `ms` (sorted in place).
double percentile(std::vector<double>& ms, double p) {
  std::sort(ms.begin(), ms.end());
  const size_t i = static_cast<size_t>(p / 100.0 * static_cast<double>(ms.size() - 1) + 0.5);
  return ms[std::min(i, ms.size() - 1)];
}

TEST_F(ActivationTest, HeldRequestsLeaveHealthAndModelsFast) {
  engine_->hold();
  constexpr size_t kHeld = 48;  // 24 times the io threads
  std::vector<std::unique_ptr<TestHttpClient>> clients;
  for (size_t i = 0; i < kHeld; ++i) {
    const Json body = {{"prompt", "x"}, {"max_tokens", 3}, {"stream", i % 2 == 1}};
    clients.push_back(std::make_unique<TestHttpClient>(port()));
    ASSERT_TRUE(clients.back()->send("POST", "/v1/completions", body.dump()));
  }
  // All held (a submission that holds an io thread lets only as many in as there are threads).
  (void)keel::testing::eventually([&] { return engine_->num_held() == kHeld; }, 2s);
  std::vector<double> health_ms, models_ms;
  for (int i = 0; i < 40; ++i) {
    for (const char* path : {"/health", "/v1/models"}) {
      TestHttpClient c(port(), 2000);
      const Clock::time_point t0 = Clock::now();
      ASSERT_TRUE(c.send("GET", path));
      std::optional<HttpResult> r = c.read_response();
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      ASSERT_TRUE(r.has_value()) << path << " stalled while requests are held";
      EXPECT_EQ(r->status, 200) << path;
      (std::string(path) == "/health" ? health_ms : models_ms).push_back(ms);
    }
  }
  const double health_p99 = percentile(health_ms, 99), models_p99 = percentile(models_ms, 99);
  std::printf("%zu held: /health p50 %.2f ms p99 %.2f ms; /v1/models p50 %.2f ms p99 %.2f ms\n",
              kHeld, percentile(health_ms, 50), health_p99, percentile(models_ms, 50), models_p99);
  EXPECT_LT(health_p99, 200.0);
  EXPECT_LT(models_p99, 200.0);
  ASSERT_EQ(engine_->num_held(), kHeld);

  // A client that leaves while held: its request is aborted as soon as it is placed.
  clients[0]->reset();
  ASSERT_TRUE(keel::testing::eventually([&] { return server_->num_connections() == kHeld - 1; }));
  engine_->release();
  for (size_t i = 1; i < kHeld; ++i) {
    std::optional<HttpResult> r = clients[i]->read_response();
    ASSERT_TRUE(r.has_value()) << "request " << i;
    ASSERT_EQ(r->status, 200) << r->body;
    if (i % 2 == 1) {
      EXPECT_EQ(r->sse_data().back(), "[DONE]");
    } else {
      EXPECT_EQ(r->json()["choices"][0]["text"], " Hello world");
    }
  }
  EXPECT_TRUE(keel::testing::eventually([&] { return fake_->total_aborts() == 1; }))
      << fake_->total_aborts() << " aborts";
  EXPECT_EQ(fake_->submitted().size(), kHeld);
}

TEST_F(ActivationTest, AHeldStreamRefusedAtTheEndGetsA503) {
  engine_->hold();
  TestHttpClient c(port());
  const Json body = {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}};
  ASSERT_TRUE(c.send("POST", "/v1/completions", body.dump()));
  ASSERT_TRUE(keel::testing::eventually([&] { return engine_->num_held() == 1; }));
  engine_->fail_held(Status::unavailable("no task executor became ready within 30 s"));
  std::optional<HttpResult> r = c.read_response();
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(r->header("retry-after"), "1");
  EXPECT_NE(r->body.find("no task executor became ready"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace keel::server::testing
