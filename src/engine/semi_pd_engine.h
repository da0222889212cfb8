// SemiPdEngine: the semi-PD task executor mode (`keel serve --mode semi-pd`): a prefill worker and
// a decode worker (semi_pd_worker.h) as two threads, each with its own queues and its own compute
// threads pinned to its core set, over ONE copy of the weights and ONE KV pool. A finished prefill
// hands its request to decode by reference (the block table moves; no KV byte is copied, no block
// taken or returned). The split of cores between them (SemiPdSplit) can change while serving:
// set_split() takes effect at each worker's next step boundary, the old pool finishing its
// iteration first (the paper's delayed, asynchronous switching).
//
// Shared state and its owners: the block allocator (kv::SharedBlockAllocator, its own mutex) is
// the one structure both workers touch concurrently; the KV bytes of a block are written only by
// the worker holding it; the model is read-only; metrics are atomic; the request registry (for
// abort) and the controller's sample window sit under this class's mutex. There is no prefix
// cache in this mode (so no shared index to lock).
// Unsupported here (refused at submit with InvalidArgument): grammars, LoRA adapters, context
// caches (retain_as), PIC chunks, sparse decode, speculative decoding, resumed requests.
//
// Thread safety: every public method may be called from any thread. OutputSink callbacks run on
// the worker threads (a request's events come from one worker at a time, in order).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "engine/engine_client.h"
#include "engine/engine_config.h"
#include "engine/metrics.h"
#include "engine/semi_pd_request.h"
#include "engine/semi_pd_split.h"
#include "engine/semi_pd_worker.h"
#include "kv/shared_block_allocator.h"
#include "model/expert_token_counts.h"
#include "model/kv_storage.h"
#include "model/model.h"

namespace keel::tokenizer {
class Tokenizer;
}  // namespace keel::tokenizer

namespace keel::engine {

// What the SLO-aware controller reads each window (take_window()): the latency samples observed
// since the last call, the load offered in it (arrivals, prefill busy core-seconds), its length
// and the split they were observed under (semi_pd_window_stats.h turns it into an observation).
struct SemiPdWindow {
  std::vector<double> ttft_seconds;  // one per request whose first token came in the window
  std::vector<double> tpot_seconds;  // one per request finished in the window with ≥ 2 tokens
  SemiPdSplit split;                 // the split in force (the last one set)
  int32_t num_prefill_waiting = 0;   // queue lengths at the call
  int32_t num_decode_running = 0;
  int32_t num_arrivals = 0;        // requests admitted by submit() in the window
  int32_t num_prefills = 0;        // prefills completed (first token or re-prefill) in it
  double prefill_busy_core_s = 0;  // Σ over prefill steps: step seconds × prefill cores
  double duration_s = 0;           // from the previous take_window() (or the start) to this one
  bool split_changed = false;      // set_split() changed the split inside the window
};

struct SemiPdDeps {
  const tokenizer::Tokenizer* tokenizer = nullptr;  // stop strings; null = refused
  // Tests: sees each hand-off (semi_pd_request.h). Empty: none.
  std::function<void(const SemiPdHandOff&)> on_hand_off;
};

class SemiPdEngine final : public EngineClient {
 public:
  // config.semi_pd must be set and valid for this machine's cores. `model` outlives the engine.
  static Result<std::unique_ptr<SemiPdEngine>> start(const model::Model& model, EngineConfig config,
                                                     SemiPdDeps deps = {});
  ~SemiPdEngine() override;  // stops both workers (requests left end with kAbort)

  Result<RequestKey> submit(GenerationRequest request, std::shared_ptr<OutputSink> sink) override;
  void abort(RequestKey key) override;
  bool release_cache(const std::string&, const std::string&) override { return false; }
  [[nodiscard]] std::optional<ContextCacheInfo> find_cache(const std::string&,
                                                           const std::string&) const override {
    return std::nullopt;
  }
  [[nodiscard]] std::vector<ContextCacheInfo> list_caches(const std::string&) const override {
    return {};
  }
  [[nodiscard]] EngineStats stats() const override;
  [[nodiscard]] MetricsSnapshot metrics() const override;
  void drain(std::chrono::milliseconds timeout) override;
  [[nodiscard]] int64_t max_model_len() const override { return config_.scheduler.max_model_len; }
  [[nodiscard]] int64_t max_waiting() const override { return config_.scheduler.max_waiting; }

  // Re-split without a stop: each worker moves to its new core set at its next step boundary.
  // InvalidArgument for a split this machine cannot hold. The call the controller's periodic hook
  // makes (no HTTP involved).
  Status set_split(const SemiPdSplit& split);
  [[nodiscard]] SemiPdSplit split() const;
  // The samples since the last call (then forgotten) and the current split.
  SemiPdWindow take_window();
  // The controller's last decision, for /metrics (SemiPdMetrics): counted by reason, with the
  // models' predictions at the chosen split (empty: no usable fit).
  void note_decision(const std::string& reason, std::optional<double> predicted_ttft_s,
                     std::optional<double> predicted_tpot_s);

  [[nodiscard]] int32_t num_kv_blocks() const { return blocks_.num_blocks(); }
  [[nodiscard]] size_t kv_block_bytes() const { return storage_.layout().block_bytes(); }
  [[nodiscard]] const kv::SharedBlockAllocator& block_allocator() const { return blocks_; }
  [[nodiscard]] const EngineConfig& config() const { return config_; }

 private:
  SemiPdEngine(const model::Model& model, EngineConfig config, model::KvStorage storage,
               int32_t num_blocks, SemiPdDeps deps);
  void forget(const SemiPdRequest& r);  // a request finished (worker thread)
  void observe_ttft(double seconds);
  void observe_prefill_step(double core_seconds, int32_t completed);

  const model::Model& model_;
  EngineConfig config_;
  const tokenizer::Tokenizer* tokenizer_;
  std::vector<int> cores_;  // allowed_cores() at start
  model::KvStorage storage_;
  kv::SharedBlockAllocator blocks_;
  Metrics metrics_;
  std::unique_ptr<model::ExpertTokenCounts> expert_counts_;  // null for a dense model
  Histogram switch_seconds_;
  SemiPdShared shared_;

  mutable Mutex mu_;
  std::unordered_map<RequestKey, std::shared_ptr<std::atomic<bool>>> live_ KEEL_GUARDED_BY(mu_);
  SemiPdSplit split_ KEEL_GUARDED_BY(mu_);
  SemiPdWindow window_ KEEL_GUARDED_BY(mu_);
  int64_t num_switches_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t window_start_ns_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<std::string, int64_t> decisions_ KEEL_GUARDED_BY(mu_);
  std::optional<double> predicted_ttft_s_ KEEL_GUARDED_BY(mu_);
  std::optional<double> predicted_tpot_s_ KEEL_GUARDED_BY(mu_);
  std::atomic<RequestKey> next_key_{1};
  std::atomic<int64_t> prompt_tokens_total_{0};
  std::atomic<int64_t> generation_tokens_total_{0};
  std::atomic<bool> draining_{false};

  // After everything the workers borrow: they stop (joined) first.
  std::unique_ptr<SemiPdWorker> prefill_;
  std::unique_ptr<SemiPdWorker> decode_;
};

}  // namespace keel::engine
