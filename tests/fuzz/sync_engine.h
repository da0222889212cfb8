// SyncEngine: an EngineClient for the server fuzz targets that answers every request inside
// submit(): the sink receives the scripted tokens (capped by max_tokens, ended early by a stop
// token id) and the final event before submit() returns; a request with retain_as becomes a
// context cache (an engine::ContextCacheTable, as in the engine) before its final event. No thread
// of its own, so a fuzz input runs on one io_context thread from start to end and is reproducible.
//
// Thread safety: none needed (one fuzz input at a time on one thread); the counters are plain.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/clock.h"
#include "engine/context_cache_table.h"
#include "engine/engine_client.h"
#include "engine/metrics.h"

namespace keel::fuzz {

class SyncEngine final : public engine::EngineClient {
 public:
  // `script`: the tokens every request generates (then FinishReason::kStop).
  SyncEngine(std::vector<int32_t> script, int64_t max_model_len);

  Result<engine::RequestKey> submit(engine::GenerationRequest request,
                                    std::shared_ptr<engine::OutputSink> sink) override;
  void abort(engine::RequestKey key) override;
  bool release_cache(const std::string& id, const std::string& salt) override {
    return caches_.remove(id, salt).has_value();
  }
  [[nodiscard]] std::optional<engine::ContextCacheInfo> find_cache(
      const std::string& id, const std::string& salt) const override {
    return caches_.find(id, salt);
  }
  [[nodiscard]] std::vector<engine::ContextCacheInfo> list_caches(
      const std::string& salt) const override {
    return caches_.list(salt);
  }
  [[nodiscard]] engine::EngineStats stats() const override;
  [[nodiscard]] engine::MetricsSnapshot metrics() const override { return metrics_.snapshot(); }
  void drain(std::chrono::milliseconds timeout) override;
  [[nodiscard]] int64_t max_model_len() const override { return max_model_len_; }
  [[nodiscard]] int64_t max_waiting() const override { return 256; }

  [[nodiscard]] int64_t num_submitted() const { return next_key_ - 1; }

 private:
  // A finishing request with retain_as becomes a context cache.
  void pin_if_cache(const engine::GenerationRequest& r, engine::RequestKey key);

  std::vector<int32_t> script_;
  int64_t max_model_len_;
  engine::Metrics metrics_;
  SteadyClock clock_;
  engine::ContextCacheTable caches_{&clock_};  // requests with retain_as that finished
  engine::RequestKey next_key_ = 1;
  int64_t generated_ = 0;
  bool draining_ = false;
};

}  // namespace keel::fuzz
