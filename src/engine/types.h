// The messages between the server (or any front end) and the engine: a GenerationRequest in, a
// stream of TokenEvents out through an OutputSink, EngineStats and MetricsSnapshot for /metrics.
// Plain data (no references, no atomics), so that each can cross a process boundary through the
// one codec in wire.h; the server depends on the engine through these types and the EngineClient
// interface only.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kv/pic.h"
#include "kv/tier_store.h"
#include "sampling/logprobs.h"
#include "sampling/sampling_params.h"

namespace keel::engine {

// The engine's handle for a submitted request (unique for the engine's lifetime).
using RequestKey = int64_t;

enum class FinishReason {
  kStop,    // end-of-generation token, a stop token id, or a stop string (TokenEvent::stop_string)
  kLength,  // max_tokens reached, or the context is full
  kAbort,   // cancelled (client disconnect, server drain)
  kError,   // the engine failed to run the request; TokenEvent::error says why
};
std::string_view finish_reason_name(FinishReason r);  // "stop", "length", "abort", "error"

// Sparse decode (RaaS and its baselines): the policy and its token budget L.
struct SparseParams {
  std::string policy = "dense";  // dense, streaming, h2o, quest or raas
  int32_t budget = 1024;         // L: tokens attended per decode step (≥ one KV page); in a
                                 // request, 0 = EngineConfig::sparse's
  friend bool operator==(const SparseParams&, const SparseParams&) = default;
};

struct GenerationRequest {
  std::string request_id;              // for logs and metrics
  std::vector<int32_t> prompt_tokens;  // already tokenized (never on the engine thread); non-empty
  sampling::SamplingParams sampling;  // includes seed; sampling.logprobs set → TokenEvent logprobs
  int32_t max_tokens = 16;            // ≥ 1
  bool ignore_eos = false;            // keep going past end-of-generation tokens
  std::vector<int32_t> stop_token_ids;  // finish with kStop on these, besides the model's EOG ids
  // Finish with kStop on the token that completes one of these in the generated text (rendered
  // as the server renders it: engine/stop_strings.h). Needs an engine with a tokenizer.
  std::vector<std::string> stop_strings;
  std::string cache_salt;  // prefix-cache isolation: blocks are shared only within a salt
  // Explicit context caching (POST /v1/caches): when set, a request that finishes normally keeps
  // its KV blocks pinned as context cache `retain_as` for retain_ms (never evicted; its full
  // blocks stay findable by prefix) until EngineClient::release_cache or expiry; the engine is
  // the cache's one owner (EngineClient::find_cache). It belongs to `cache_salt`. A cache with
  // the same id is replaced. retain_description: what the front end wants back with the cache
  // (the server: its source and messages), opaque to the engine.
  std::string retain_as;
  int64_t retain_ms = 0;
  std::string retain_description;
  // EPIC: spans of prompt_tokens that are position-independent chunks (each usually starting
  // with its own BOS): their KV is computed alone, cached by their own tokens, and linked at
  // their real positions. pic_link: the variant (unset = EngineConfig::pic_link).
  std::vector<kv::PicChunk> pic_chunks;
  std::optional<kv::PicVariant> pic_link;
  // Sparse decode (unset = EngineConfig::sparse). A sparse request's PIC chunks are ignored (it
  // is computed in full), and its generated positions are never published in the prefix cache.
  std::optional<SparseParams> sparse;
  friend bool operator==(const GenerationRequest&, const GenerationRequest&) = default;
};

struct TokenEvent {
  std::vector<int32_t> tokens;               // new tokens since the previous event (usually 1)
  std::vector<sampling::Logprobs> logprobs;  // parallel to `tokens` when sampling.logprobs is set
  std::optional<FinishReason> finish;        // set on the request's last event only
  std::optional<int32_t> stop_string;        // finish == kStop by a stop string: its index in
                                             // GenerationRequest::stop_strings
  std::string error;                         // when finish == kError
  int32_t num_prompt_tokens = 0;             // usage: prompt length
  int32_t num_cached_tokens = 0;             // usage: prompt tokens served by the prefix cache
  friend bool operator==(const TokenEvent&, const TokenEvent&) = default;
};

// Receives one request's events, in order. Called on the engine thread, so it must not block
// (post to an io_context, push to a queue). Exactly one event carries `finish`; none follows it.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void on_event(TokenEvent event) = 0;
};

// A pinned context cache (GenerationRequest::retain_as) as its owner, the engine, reports it.
struct ContextCacheInfo {
  std::string id;               // retain_as
  std::string cache_salt;       // its owner: only callers with this salt see it
  std::vector<int32_t> tokens;  // the pinned sequence (the request's prompt)
  std::string description;      // retain_description, as given
  int64_t ttl_ms = 0;           // retain_ms: it expires ttl_ms after it was pinned
  int64_t created_unix_ms = 0;  // wall-clock time it was pinned (for display; expiry runs on the
                                // engine's monotonic clock)
  [[nodiscard]] int64_t expires_unix_ms() const { return created_unix_ms + ttl_ms; }
  friend bool operator==(const ContextCacheInfo&, const ContextCacheInfo&) = default;
};

// A snapshot of the engine's state and counters (for /metrics and /health).
struct EngineStats {
  int32_t num_running = 0;
  int32_t num_waiting = 0;
  int32_t num_tracked = 0;      // requests the engine thread holds state for (finished ones until
                                // their last in-flight step completes); 0 when idle
  float kv_usage = 0.0f;        // fraction of KV blocks in use, 0..1
  int64_t kv_blocks_used = 0;   // KV blocks referenced (running requests, pins, chunk index)
  int64_t kv_blocks_total = 0;  // KV blocks in the pool
  int64_t kv_capacity_tokens = 0;
  int64_t prefix_queries_tokens = 0;  // prompt tokens looked up in the prefix cache
  int64_t prefix_hits_tokens = 0;     // of which found
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t num_preemptions_total = 0;
  int64_t steps_total = 0;
  bool host_tier_enabled = false;      // T1 configured (--kv-host-bytes)
  bool disk_tier_enabled = false;      // T2 configured (--kv-disk-dir)
  kv::TierStats host_tier;             // T1 counters when enabled
  kv::TierStats disk_tier;             // T2 counters when enabled
  int64_t tier_blocks_fetched = 0;     // tier-held blocks admissions read back
  int64_t tier_blocks_recomputed = 0;  // tier-held blocks recomputed (cheaper, or unreadable)
  int64_t tier_transfers_pending = 0;  // tier reads and demotions queued or running
  int64_t tier_demotions_dropped = 0;  // evicted blocks not cached: the demotion queue was full
  int32_t num_context_caches = 0;      // pinned context caches (retain_as)
  int64_t context_cache_blocks = 0;    // KV blocks they hold
  int64_t pic_requests = 0;            // requests linked from PIC chunk caches
  int64_t pic_tokens_linked = 0;       // prompt tokens copied from chunk caches
  int64_t pic_tokens_recomputed = 0;   // prompt tokens those requests computed
  int64_t pic_chunks_compiled = 0;     // chunks computed alone (internal requests)
  int64_t pic_chunks_reused = 0;       // chunks taken from the chunk index
  int64_t pic_index_blocks = 0;        // KV blocks the chunk index holds
  int64_t sparse_requests = 0;         // requests decoded with a sparse policy
  int64_t sparse_pages_released = 0;   // KV pages they gave back to the pool while decoding
  int64_t sparse_max_pages_held = 0;   // the most KV pages one sparse request held at once
  friend bool operator==(const EngineStats&, const EngineStats&) = default;
};

}  // namespace keel::engine

namespace keel::engine {

// A histogram at one moment: Prometheus' cumulative buckets.
struct HistogramSnapshot {
  std::vector<double> bounds;        // increasing upper bounds of the buckets (+Inf implicit)
  std::vector<uint64_t> cumulative;  // [bounds.size() + 1]: count ≤ each bound, then the total
  double sum = 0.0;
  uint64_t count = 0;
  friend bool operator==(const HistogramSnapshot&, const HistogramSnapshot&) = default;
};

// The engine's request-level histograms and counters at one moment (vLLM's metric set).
struct MetricsSnapshot {
  HistogramSnapshot time_to_first_token_seconds;
  HistogramSnapshot inter_token_latency_seconds;
  HistogramSnapshot e2e_request_latency_seconds;
  HistogramSnapshot request_queue_time_seconds;
  HistogramSnapshot request_prompt_tokens;
  HistogramSnapshot request_generation_tokens;
  // request_success_total{finished_reason}: indexed by FinishReason.
  std::array<int64_t, 4> request_finished_total{};
  friend bool operator==(const MetricsSnapshot&, const MetricsSnapshot&) = default;
};

}  // namespace keel::engine
