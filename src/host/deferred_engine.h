// DeferredEngine: an EngineClient that answers Unavailable until the real engine is attached, so
// a front end can listen (and report 503 on /health) while the weights load. Before then it has
// no context caches and empty stats and metrics.
//
// Thread safety: attach() once from the loading thread; every other method from any thread. The
// attached engine must outlive this client's last use.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_client.h"
#include "engine/metrics.h"

namespace keel::host {

class DeferredEngine final : public engine::EngineClient {
 public:
  void attach(engine::EngineClient* engine) { engine_.store(engine, std::memory_order_release); }

  Result<engine::RequestKey> submit(engine::GenerationRequest request,
                                    std::shared_ptr<engine::OutputSink> sink) override {
    if (auto* e = get()) return e->submit(std::move(request), std::move(sink));
    return Status::unavailable("the model is still loading");
  }
  void abort(engine::RequestKey key) override {
    if (auto* e = get()) e->abort(key);
  }
  bool release_cache(const std::string& id, const std::string& salt) override {
    if (auto* e = get()) return e->release_cache(id, salt);
    return false;
  }
  void release_kv_pin(engine::RequestKey key) override {
    if (auto* e = get()) e->release_kv_pin(key);
  }
  [[nodiscard]] std::optional<engine::ContextCacheInfo> find_cache(
      const std::string& id, const std::string& salt) const override {
    if (auto* e = get()) return e->find_cache(id, salt);
    return std::nullopt;
  }
  [[nodiscard]] std::vector<engine::ContextCacheInfo> list_caches(
      const std::string& salt) const override {
    if (auto* e = get()) return e->list_caches(salt);
    return {};
  }
  [[nodiscard]] engine::EngineStats stats() const override {
    if (auto* e = get()) return e->stats();
    return {};
  }
  [[nodiscard]] engine::MetricsSnapshot metrics() const override {
    if (auto* e = get()) return e->metrics();
    return empty_metrics_.snapshot();
  }
  void drain(std::chrono::milliseconds timeout) override {
    if (auto* e = get()) e->drain(timeout);
  }
  [[nodiscard]] int64_t max_model_len() const override {
    if (auto* e = get()) return e->max_model_len();
    return 0;
  }
  [[nodiscard]] int64_t max_waiting() const override {
    if (auto* e = get()) return e->max_waiting();
    return INT64_MAX;  // unknown while loading: requests get 503 before this matters
  }
  Status load_lora(const std::string& name, const std::string& path) override {
    if (auto* e = get()) return e->load_lora(name, path);
    return Status::unavailable("the model is still loading");
  }
  Status unload_lora(const std::string& name) override {
    if (auto* e = get()) return e->unload_lora(name);
    return Status::unavailable("the model is still loading");
  }
  [[nodiscard]] std::vector<engine::LoraInfo> list_loras() const override {
    if (auto* e = get()) return e->list_loras();
    return {};
  }

 private:
  [[nodiscard]] engine::EngineClient* get() const {
    return engine_.load(std::memory_order_acquire);
  }
  std::atomic<engine::EngineClient*> engine_{nullptr};
  engine::Metrics empty_metrics_;
};

}  // namespace keel::host
