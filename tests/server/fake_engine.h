// FakeEngine: a deterministic EngineClient for the server tests. Its own "engine thread" emits
// each request's scripted tokens (one per event, interleaved across requests, an optional delay
// between tokens) and calls the sinks from that thread, as the real engine does. A script can hold
// a request in the queue or in "prefill" (no events) or stall it mid-decode, so tests can
// disconnect at each stage; abort() is counted per key and answered with a final kAbort event.
// submit() can be told to fail with ResourceExhausted (queue full) or Unavailable (draining).
// drain() behaves like the engine's: it returns once every request has finished and its last
// event was handed to its sink, or, past the timeout, after aborting them all. Stop strings are
// decided as the engine decides them (engine::StopStringDetector, with the tokenizer given to
// set_tokenizer): the script ends with kStop and TokenEvent::stop_string on the completing token.
// Context caches live in an engine::ContextCacheTable on a manual clock (advance_cache_clock), as
// in the engine: pinned when a retain_as request finishes normally, found with their salt only.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "engine/context_cache_table.h"
#include "engine/engine_client.h"
#include "engine/metrics.h"
#include "engine/stop_strings.h"

namespace keel::server::testing {

struct FakeScript {
  enum class Stall { kNone, kQueued, kPrefill, kDecode };
  std::vector<int32_t> tokens;  // emitted one per event (capped at the request's max_tokens)
  // How the last event ends when all tokens are out (kLength is forced when max_tokens cut the
  // script short).
  engine::FinishReason finish = engine::FinishReason::kStop;
  std::string error;  // for kError
  // kQueued/kPrefill: no event at all until aborted; kDecode: emit `stall_after` tokens, then
  // nothing until aborted.
  Stall stall = Stall::kNone;
  size_t stall_after = 1;
  std::chrono::milliseconds token_delay{0};
  int32_t num_cached_tokens = 0;
};

class FakeEngine final : public engine::EngineClient {
 public:
  using ScriptFn = std::function<FakeScript(const engine::GenerationRequest&)>;

  explicit FakeEngine(int64_t max_model_len = 256);
  ~FakeEngine() override;

  Result<engine::RequestKey> submit(engine::GenerationRequest request,
                                    std::shared_ptr<engine::OutputSink> sink) override;
  void abort(engine::RequestKey key) override;
  bool release_cache(const std::string& id, const std::string& salt) override;
  void release_kv_pin(engine::RequestKey key) override;
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
  [[nodiscard]] int64_t max_waiting() const override { return max_waiting_; }
  // LoRA adapters as names only: a path containing "bad" is refused as the engine refuses an
  // invalid file; a loaded name may be submitted (others: NotFound, as the engine).
  Status load_lora(const std::string& name, const std::string& path) override;
  Status unload_lora(const std::string& name) override;
  [[nodiscard]] std::vector<engine::LoraInfo> list_loras() const override;

  // --- test controls ---
  void set_script(ScriptFn fn);
  // The tokenizer stop strings are matched with (the server's); before any submit.
  void set_tokenizer(const tokenizer::Tokenizer* tokenizer) { tokenizer_ = tokenizer; }
  void set_queue_full(bool full) { queue_full_ = full; }
  void set_unavailable(bool unavailable) { unavailable_ = unavailable; }
  // submit() fails with ResourceExhausted while this many requests are active (the real engine
  // counts only waiting ones; here nothing waits long).
  void set_max_waiting(int64_t n) { max_waiting_ = n; }
  // submit() of a context-cache request (retain_as) fails with OutOfRange, as the real engine's
  // pin quota does.
  void set_cache_quota_full(bool full) { cache_quota_full_ = full; }
  engine::Metrics& mutable_metrics() { return metrics_; }
  // Moves the clock context caches expire on (it starts at 0 and moves only when told to).
  void advance_cache_clock(std::chrono::milliseconds d) { cache_clock_.advance(d); }

  [[nodiscard]] std::vector<engine::GenerationRequest> submitted() const;
  [[nodiscard]] std::vector<engine::RequestKey> keys() const;
  [[nodiscard]] int abort_count(engine::RequestKey key) const;
  [[nodiscard]] int total_aborts() const;
  // The caches release_cache() released, and every id it was called with (released or not).
  [[nodiscard]] std::vector<std::string> released_caches() const;
  [[nodiscard]] std::vector<std::string> release_calls() const;
  // The keys release_kv_pin() was called with, in order.
  [[nodiscard]] std::vector<engine::RequestKey> kv_pin_releases() const;
  [[nodiscard]] size_t num_active() const;
  // Block until the condition holds or `timeout` passes; return whether it holds.
  bool wait_for_submits(size_t n, std::chrono::milliseconds timeout) const;
  bool wait_for_aborted(engine::RequestKey key, std::chrono::milliseconds timeout) const;
  bool wait_for_idle(std::chrono::milliseconds timeout) const;  // no active requests

 private:
  struct Active {
    engine::RequestKey key = 0;
    engine::GenerationRequest request;
    std::shared_ptr<engine::OutputSink> sink;
    FakeScript script;
    size_t next = 0;  // tokens emitted
    std::chrono::steady_clock::time_point due;
    bool aborted = false;
    std::unique_ptr<engine::StopStringDetector> stops;  // request.stop_strings
  };
  // A manual clock readable from any thread.
  class CacheClock final : public keel::Clock {
   public:
    [[nodiscard]] int64_t now_ns() const override { return now_ns_.load(); }
    void advance(std::chrono::milliseconds d) {
      now_ns_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
    }

   private:
    std::atomic<int64_t> now_ns_{0};
  };
  void loop();
  // Under mu_: the next event of `a`, or nullopt when it is not due / stalled.
  std::optional<engine::TokenEvent> next_event(Active& a, std::chrono::steady_clock::time_point now,
                                               bool* done);

  const int64_t max_model_len_;
  const tokenizer::Tokenizer* tokenizer_ = nullptr;
  engine::Metrics metrics_;
  std::atomic<bool> queue_full_{false};
  std::atomic<bool> unavailable_{false};
  std::atomic<int64_t> max_waiting_{int64_t{1} << 20};
  std::atomic<bool> cache_quota_full_{false};
  // Context caches, kept as the engine keeps them: a request with retain_as that finishes
  // normally is put here before its final event is delivered.
  CacheClock cache_clock_;
  engine::ContextCacheTable caches_{&cache_clock_};

  mutable std::mutex mu_;
  std::vector<engine::LoraInfo> loras_;  // guarded by mu_
  mutable std::condition_variable cv_;   // state changes (tests wait on it)
  std::condition_variable work_cv_;      // wakes the engine thread
  ScriptFn script_;
  std::map<engine::RequestKey, Active> active_;
  std::vector<engine::GenerationRequest> submitted_;
  std::vector<engine::RequestKey> keys_;
  std::map<engine::RequestKey, int> aborts_;
  std::vector<std::string> released_caches_;
  std::vector<std::string> release_calls_;
  std::vector<engine::RequestKey> kv_pin_releases_;
  engine::RequestKey next_key_ = 100;
  int delivering_ = 0;  // events taken from active_ but not yet handed to their sinks
  int64_t generated_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

// Fake logprobs for token `id` at output position `pos`: chosen logprob -(pos+1)/8, and `top`
// alternatives id, id+1, ... with decreasing logprobs.
sampling::Logprobs fake_logprobs(int32_t id, size_t pos, int32_t top);

}  // namespace keel::server::testing
