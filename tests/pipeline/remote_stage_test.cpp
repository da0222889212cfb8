// Stage 1 behind a StageServer on a loopback link, stage 0 an engine with a RemoteStage: the
// greedy outputs of concurrent requests equal the whole-model engine's on stories260K; a hello
// for another model is refused; a stage that goes away mid-generation ends the request in flight
// and every later one with an error, promptly (no hang).
#include <gtest/gtest.h>

#include <atomic>

#include "../engine/engine_test_util.h"
#include "engine/model_identity.h"
#include "pipeline/remote_stage.h"
#include "pipeline/stage_server.h"

namespace keel::engine {
namespace {

// Counts tokens as they arrive and keeps the final event's reason and error text.
class WatchingSink final : public OutputSink {
 public:
  void on_event(TokenEvent ev) override {
    std::lock_guard lock(mu_);
    num_tokens_ += static_cast<int>(ev.tokens.size());
    if (ev.finish) {
      finish_ = ev.finish;
      error_ = ev.error;
      cv_.notify_all();
    }
  }
  int num_tokens() {
    std::lock_guard lock(mu_);
    return num_tokens_;
  }
  // The finish reason, waiting up to `ms`; nullopt on timeout.
  std::optional<FinishReason> wait(int ms) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return finish_.has_value(); });
    return finish_;
  }
  std::string error() {
    std::lock_guard lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int num_tokens_ = 0;
  std::optional<FinishReason> finish_;
  std::string error_;
};

pipeline::StageSpec spec_for(const EngineConfig& c, int64_t split) {
  pipeline::StageSpec spec;
  spec.first_layer = split;
  spec.num_blocks = 4096;
  spec.block_size = c.block_size;
  spec.kv_dtype = c.kv_dtype;
  spec.max_batch_tokens = c.scheduler.max_batched_tokens;
  return spec;
}

class RemoteStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    config_ = base_config();
    pipeline::StageServerConfig sc;
    sc.isa = config_.isa;
    auto server = pipeline::StageServer::start(*model_, sc);
    ASSERT_TRUE(server.ok()) << server.status().to_string();
    server_ = std::move(*server);
    auto key = model_identity(model_->file());
    ASSERT_TRUE(key.ok());
    key_ = *key;
  }
  Result<std::unique_ptr<pipeline::RemoteStage>> connect(const kv::BlockHash& key) {
    pipeline::RemoteStageOptions o;
    o.address = "127.0.0.1:" + std::to_string(server_->port());
    o.step_timeout = std::chrono::milliseconds(20000);
    return pipeline::RemoteStage::connect(o, spec_for(config_, 3), key);
  }
  std::unique_ptr<model::Model> model_;
  EngineConfig config_;
  std::unique_ptr<pipeline::StageServer> server_;
  kv::BlockHash key_;
};

TEST_F(RemoteStageTest, ConcurrentGreedyOutputsEqualTheWholeModel) {
  const std::vector<std::vector<int32_t>> ps = {
      {1, 403, 407, 261, 378},
      {1, 12, 300, 41, 7, 88, 140, 66, 31, 250, 33, 8, 61, 77, 5, 300},
      {1, 90, 17}};
  auto run_all = [&](Engine& e) {
    std::vector<std::shared_ptr<CollectingSink>> sinks;
    for (const auto& p : ps) {
      sinks.push_back(std::make_shared<CollectingSink>());
      EXPECT_TRUE(e.submit(greedy(p, 20), sinks.back()).ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& s : sinks) out.push_back(s->wait());
    return out;
  };
  std::vector<std::vector<int32_t>> want;
  {
    auto e = Engine::start(*model_, config_);
    ASSERT_TRUE(e.ok());
    want = run_all(**e);
  }
  auto stage = connect(key_);
  ASSERT_TRUE(stage.ok()) << stage.status().to_string();
  EngineDeps deps;
  deps.pipeline_tail = stage->get();
  auto e = Engine::start(*model_, config_, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(run_all(**e), want);
  EXPECT_GT(server_->num_steps(), 0);
}

TEST_F(RemoteStageTest, HelloForAnotherModelIsRefused) {
  auto stage = connect(kv::BlockHash{key_.lo ^ 1, key_.hi});
  ASSERT_FALSE(stage.ok());
  EXPECT_EQ(stage.status().code(), StatusCode::kInvalidArgument) << stage.status().to_string();
}

TEST_F(RemoteStageTest, AStageThatGoesAwayEndsRequestsWithAnErrorNotAHang) {
  auto stage = connect(key_);
  ASSERT_TRUE(stage.ok()) << stage.status().to_string();
  EngineDeps deps;
  deps.pipeline_tail = stage->get();
  auto e = Engine::start(*model_, config_, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  auto sink = std::make_shared<WatchingSink>();
  ASSERT_TRUE((*e)->submit(greedy({1, 403, 407}, 400), sink).ok());
  ASSERT_TRUE(eventually([&] { return sink->num_tokens() >= 3; })) << "no tokens before the stop";
  server_->stop();  // the link closes under the running request
  EXPECT_EQ(sink->wait(10000), FinishReason::kError) << "the request did not end";
  EXPECT_NE(sink->error().find("pipeline stage"), std::string::npos) << sink->error();
  auto later = std::make_shared<WatchingSink>();
  ASSERT_TRUE((*e)->submit(greedy({1, 90, 17}, 8), later).ok());
  EXPECT_EQ(later->wait(10000), FinishReason::kError);
}

}  // namespace
}  // namespace keel::engine
