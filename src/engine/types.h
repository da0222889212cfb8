// The messages between the server (or any front end) and the engine: a GenerationRequest in, a
// stream of TokenEvents out through an OutputSink, EngineStats and MetricsSnapshot for /metrics.
// Plain data (no references, no atomics), so that each can cross a process boundary through the
// one codec in wire.h; the server depends on the engine through these types and the EngineClient
// interface only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/early_exit_params.h"
#include "engine/speculative_params.h"
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

// The kind of work a request is, for the cluster's admission layer (cluster/job/admission.h):
// interactive requests are let in before batch ones (the Batch API's lines), batch before
// training.
enum class WorkClass : uint8_t { kInteractive, kBatch, kTraining };
std::string_view work_class_name(WorkClass c);  // "interactive", "batch", "training"

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
  int32_t max_tokens = 16;            // ≥ 1; counts resumed_tokens too
  bool ignore_eos = false;            // keep going past end-of-generation tokens
  std::vector<int32_t> stop_token_ids;  // finish with kStop on these, besides the model's EOG ids
  // Finish with kStop on the token that completes one of these in the generated text (rendered
  // as the server renders it: engine/stop_strings.h). Needs an engine with a tokenizer.
  std::vector<std::string> stop_strings;
  // Structured outputs: a GBNF grammar (grammar/gbnf_parser.h) every generated token must follow
  // (the server compiles response_format json_schema / json_object and `regex` to it). The output
  // is closed within max_tokens (the grammar engine's budget), and EOG tokens are allowed only
  // when it is complete. Needs an engine with a tokenizer. Empty: unconstrained.
  std::string grammar;
  std::string cache_salt;  // prefix-cache isolation: blocks are shared only within a salt
  // Admission (cluster/job/admission.h): the request's class and priority (vLLM's `priority`:
  // lower first; default 0). One engine runs its requests first come, first served; a JE that
  // holds work back while its fleet is full lets it in by class, then priority.
  WorkClass work_class = WorkClass::kInteractive;
  int32_t priority = 0;
  // Fair admission among tenants (engine/vtc.h): the tenant the request is served for ("" =
  // none: every such request is one tenant) and its weight (> 0; a tenant of weight 2 gets twice
  // the service of one of weight 1 while both wait). The server sets them from the API key.
  std::string tenant;
  double tenant_weight = 1.0;
  // Program-aware admission (engine/program_priority.h): the agent program this call belongs to
  // (a Responses chain's first response id, or the X-Program-Id header); within a tenant, calls
  // of programs that received less service go first. "" = the call is a program of its own.
  std::string program;
  // The LoRA adapter to run with (its name in EngineClient::list_loras()); "" = the base model.
  // Its KV is cached under the adapter's identity, apart from the base model's and other
  // adapters' (engine/lora_registry.h). NotFound at submit when no adapter has this name.
  std::string lora;
  // Explicit context caching (POST /v1/caches): when set, a request that finishes normally keeps
  // its KV blocks pinned as context cache `retain_as` for retain_ms (never evicted; its full
  // blocks stay findable by prefix) until EngineClient::release_cache or expiry; the engine is
  // the cache's one owner (EngineClient::find_cache). It belongs to `cache_salt`. A cache with
  // the same id is replaced. retain_description: what the front end wants back with the cache
  // (the server: its source and messages), opaque to the engine.
  std::string retain_as;
  int64_t retain_ms = 0;
  std::string retain_description;
  // KV kept across tool calls (docs/agent-kv.md): the front end sets it on a call that may end in
  // a tool call (chat with tools and tool_choice not "none"). When such a request finishes with
  // kStop, its published prompt + output blocks stay pinned in the prefix cache for
  // EngineConfig::kv_pin_ttl_s within the pin caps (kv/kv_pins.h) as pin <its key>, so the next
  // turn finds them however much other traffic ran meanwhile; the front end releases the pin
  // (EngineClient::release_kv_pin) when the output was not a tool call. Carried by the wire codec
  // (absent = false): a cluster's task executor pins as keel serve does, and the gateway's
  // release reaches it through the JE (docs/agent-kv.md, "In a cluster").
  bool keep_kv = false;
  // EPIC: spans of prompt_tokens that are position-independent chunks (each usually starting
  // with its own BOS): their KV is computed alone, cached by their own tokens, and linked at
  // their real positions. pic_link: the variant (unset = EngineConfig::pic_link).
  std::vector<kv::PicChunk> pic_chunks;
  std::optional<kv::PicVariant> pic_link;
  // Sparse decode (unset = EngineConfig::sparse). A sparse request's PIC chunks are ignored (it
  // is computed in full), and its generated positions are never published in the prefix cache.
  std::optional<SparseParams> sparse;
  // Speculative decoding (docs/speculative.md; unset = EngineConfig::speculative): each decode
  // step verifies up to k drafted tokens in one forward pass. The output is the same as without
  // it (greedy: the same tokens; seeded sampling: the same draws). Ignored for sparse requests.
  std::optional<SpeculativeParams> speculative;
  // SpecEE early exit (engine/early_exit_params.h; unset = EngineConfig::early_exit): decode
  // steps may stop at an early layer. Its generated KV is not shared through the prefix cache
  // with requests decoded at full depth (a separate cache key).
  std::optional<EarlyExitParams> early_exit;
  // A re-driven request (keel cluster: its first engine died mid-request): the last
  // resumed_tokens of prompt_tokens were generated by an earlier attempt of this request, and the
  // engine continues it so that the client sees what an uninterrupted run would have produced.
  // They count as generated everywhere: the sampler's draw counter starts at resumed_tokens; the
  // penalties count them as output, not prompt; stop strings see them as generated text (a stop
  // string completed across the boundary finishes the request; one completed inside them is
  // refused, as are an EOG or stop token id among them — the earlier attempt would have
  // finished); max_tokens counts them, so at most max_tokens − resumed_tokens more are generated;
  // usage (TokenEvent::num_prompt_tokens, num_cached_tokens) and prompt metrics count the original
  // prompt only; generation metrics count the tokens this engine generates. Submit refuses with
  // InvalidArgument unless 0 ≤ resumed_tokens < prompt_tokens.size() and resumed_tokens <
  // max_tokens (engine/resumed_request.h).
  // Exact continuation holds for dense requests without PIC chunks (sparse decode and PIC links
  // are approximate by design).
  int32_t resumed_tokens = 0;

  // The prompt the client sent: prompt_tokens without the resumed ones.
  [[nodiscard]] int32_t num_original_prompt_tokens() const {
    return static_cast<int32_t>(prompt_tokens.size()) - resumed_tokens;
  }
  // Tokens still to generate at most: max_tokens without the resumed ones.
  [[nodiscard]] int32_t max_new_tokens() const { return max_tokens - resumed_tokens; }
  friend bool operator==(const GenerationRequest&, const GenerationRequest&) = default;
};

struct TokenEvent {
  std::vector<int32_t> tokens;               // new tokens since the previous event (usually 1)
  std::vector<sampling::Logprobs> logprobs;  // parallel to `tokens` when sampling.logprobs is set
  std::optional<FinishReason> finish;        // set on the request's last event only
  std::optional<int32_t> stop_string;        // finish == kStop by a stop string: its index in
                                             // GenerationRequest::stop_strings
  std::string error;                         // when finish == kError
  int32_t num_prompt_tokens = 0;             // usage: prompt length (without resumed_tokens)
  int32_t num_cached_tokens = 0;             // usage: prompt tokens served by the prefix cache
                                             // (at most num_prompt_tokens)
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

// A LoRA adapter an engine serves (EngineClient::list_loras()).
struct LoraInfo {
  std::string name;  // what GenerationRequest::lora (the API's `model`) names it by
  std::string path;  // the GGUF adapter file it was loaded from
  int64_t rank = 0;
  std::string targets;       // adapted projections, e.g. "q,k,v,o"
  int64_t created_unix = 0;  // when it was loaded (seconds)
  friend bool operator==(const LoraInfo&, const LoraInfo&) = default;
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
  // Tier T3 (a peer TE's cache): filled by the TE shell (cluster/kv/kv_peer_fetch.h), 0 elsewhere.
  int64_t peer_decisions_fetch = 0;      // hinted requests whose blocks the cost model fetched
  int64_t peer_decisions_recompute = 0;  // ... recomputed instead (or the peer was unreachable)
  int64_t peer_blocks_fetched = 0;       // blocks fetched from peers into T1
  int64_t peer_hit_tokens = 0;           // their tokens
  int32_t num_context_caches = 0;        // pinned context caches (retain_as)
  int64_t context_cache_blocks = 0;      // KV blocks they hold
  int64_t pic_requests = 0;              // requests linked from PIC chunk caches
  int64_t pic_tokens_linked = 0;         // prompt tokens copied from chunk caches
  int64_t pic_tokens_recomputed = 0;     // prompt tokens those requests computed
  int64_t pic_chunks_compiled = 0;       // chunks computed alone (internal requests)
  int64_t pic_chunks_reused = 0;         // chunks taken from the chunk index
  int64_t pic_index_blocks = 0;          // KV blocks the chunk index holds
  int64_t sparse_requests = 0;           // requests decoded with a sparse policy
  int64_t sparse_pages_released = 0;     // KV pages they gave back to the pool while decoding
  int64_t sparse_max_pages_held = 0;     // the most KV pages one sparse request held at once
  // Speculative decoding: verification steps of speculating sequences (a seq-step with ≥ 1
  // draft), the tokens drafted and accepted in them, and the tokens they emitted (accepted + 1
  // each). Acceptance rate = accepted / drafted; tokens per step = emitted / steps.
  int64_t spec_verify_steps = 0;
  int64_t spec_drafted_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  int64_t spec_emitted_tokens = 0;
  // Fair admission: each named tenant's virtual token counter (engine/vtc.h), weighted service.
  std::map<std::string, double> tenant_vtc;
  // KV kept across tool calls (kv/kv_pins.h): session pins held, the distinct KV blocks they pin
  // (in total and per named tenant), pins made, and pins released by why.
  int32_t num_kv_pins = 0;
  int64_t kv_pinned_blocks = 0;
  std::map<std::string, int64_t> tenant_kv_pinned_blocks;
  int64_t kv_pins_total = 0;
  int64_t kv_pins_released_ttl = 0;       // their TTL passed
  int64_t kv_pins_released_cap = 0;       // a newer pin passed the tenant's or the total cap
  int64_t kv_pins_released_subsumed = 0;  // a newer pin of the tenant held all their blocks
  int64_t kv_pins_released_unused = 0;    // the turn did not end in a tool call (or a reset)
  int64_t kv_pins_released_pressure = 0;  // a request could not be admitted while nothing ran
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

// A semi-PD engine's split state (engine/semi_pd_engine.h): the current split (the last asked),
// the compute threads each worker runs now, and the re-split downtime of the workers.
struct SemiPdMetrics {
  int32_t split_prefill = 0;    // cores asked for the prefill worker
  int32_t split_decode = 0;     // ... and the decode worker
  int32_t prefill_threads = 0;  // threads the prefill worker computes with now
  int32_t decode_threads = 0;
  int64_t num_switches = 0;                  // re-splits asked
  HistogramSnapshot switch_seconds;          // per worker switch: time not computing because of it
  std::map<std::string, int64_t> decisions;  // the split controller's decisions by reason
  std::optional<double> predicted_ttft_s;    // its models at the split chosen last (no fit: empty)
  std::optional<double> predicted_tpot_s;
  friend bool operator==(const SemiPdMetrics&, const SemiPdMetrics&) = default;
};

// An MoE model's routed tokens per expert since the engine started
// (model/expert_token_counts.h): tokens[layer * n_expert + expert].
struct ExpertTokens {
  int32_t n_layer = 0;
  int32_t n_expert = 0;
  std::vector<int64_t> tokens;
  friend bool operator==(const ExpertTokens&, const ExpertTokens&) = default;
};

// The engine's request-level histograms and counters at one moment (vLLM's metric set).
struct MetricsSnapshot {
  HistogramSnapshot time_to_first_token_seconds;
  HistogramSnapshot inter_token_latency_seconds;
  HistogramSnapshot e2e_request_latency_seconds;
  HistogramSnapshot request_queue_time_seconds;
  HistogramSnapshot request_prompt_tokens;
  HistogramSnapshot request_generation_tokens;
  // SpecEE early exit: layers executed per decode token that could exit (docs/speculative.md).
  HistogramSnapshot early_exit_layers;
  // request_success_total{finished_reason}: indexed by FinishReason.
  std::array<int64_t, 4> request_finished_total{};
  std::optional<SemiPdMetrics> semi_pd;           // set by a semi-PD engine only
  std::optional<ExpertTokens> moe_expert_tokens;  // set for an MoE model only
  friend bool operator==(const MetricsSnapshot&, const MetricsSnapshot&) = default;
};

}  // namespace keel::engine
