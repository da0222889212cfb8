// Helpers for the engine tests that run a real model (stories260K from ../shared): a sink that
// collects one request's events, the model, a base configuration, greedy requests, polling.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "engine/engine.h"
#include "model/model.h"
#include "support/test_support.h"

namespace keel::engine {
namespace {

// Collects one request's events; wait() blocks until the final one.
class CollectingSink final : public OutputSink {
 public:
  void on_event(TokenEvent ev) override {
    std::lock_guard lock(mu_);
    for (int32_t t : ev.tokens) tokens_.push_back(t);
    if (ev.finish) {
      finish_ = ev.finish;
      stop_string_ = ev.stop_string;
      cached_ = ev.num_cached_tokens;
      cv_.notify_all();
    }
    ++events_;
  }
  // The generated tokens, once finished (fails the test on timeout).
  std::vector<int32_t> wait(int timeout_ms = 60000) {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] {
      return finish_.has_value();
    })) << "request did not finish";
    return tokens_;
  }
  std::optional<FinishReason> finish() {
    std::lock_guard lock(mu_);
    return finish_;
  }
  int cached() {
    std::lock_guard lock(mu_);
    return cached_;
  }
  std::optional<int32_t> stop_string() {
    std::lock_guard lock(mu_);
    return stop_string_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int32_t> tokens_;
  std::optional<FinishReason> finish_;
  std::optional<int32_t> stop_string_;
  int cached_ = 0;
  int events_ = 0;
};

inline std::unique_ptr<model::Model> load_stories() {
  auto m = model::Model::open(testing::shared_path("models/stories260K/stories260K.gguf"));
  EXPECT_TRUE(m.ok()) << m.error().to_string();
  return m.ok() ? std::move(m).value() : nullptr;
}

inline EngineConfig base_config() {
  EngineConfig c;
  c.threads = 1;
  c.isa = kernels::best_isa(detect_cpu_features());
  c.eog_token_ids = {2};
  return c;
}

inline GenerationRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_tokens = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0.0f;
  return r;
}

inline std::vector<int32_t> run_one(Engine& e, GenerationRequest r) {
  auto sink = std::make_shared<CollectingSink>();
  auto key = e.submit(std::move(r), sink);
  EXPECT_TRUE(key.ok()) << key.error().to_string();
  return key.ok() ? sink->wait() : std::vector<int32_t>{};
}

using keel::testing::eventually;

}  // namespace
}  // namespace keel::engine
