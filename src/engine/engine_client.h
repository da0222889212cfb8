// EngineClient: what a front end (the HTTP server, tests) may ask of an engine. Every method is
// thread-safe; the engine's own thread owns all engine state and learns of calls through
// messages. The real implementation is Engine (engine.h); tests use fakes.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/types.h"

namespace keel::engine {

class EngineClient {
 public:
  virtual ~EngineClient() = default;

  // Queues a request. Errors: InvalidArgument (malformed: empty prompt, token id outside the
  // vocabulary, prompt + max_tokens over the context; OutOfRange: a context cache over the pin
  // quota → 400), ResourceExhausted (the waiting queue is full → HTTP 429), Unavailable
  // (draining or stopped → 503). On success the sink will receive
  // the request's events; on error it receives nothing.
  virtual Result<RequestKey> submit(GenerationRequest request,
                                    std::shared_ptr<OutputSink> sink) = 0;
  // What submit() returns, handed to submit_async's caller exactly once.
  using SubmitDone = std::function<void(Result<RequestKey>)>;
  // submit() without holding the caller's thread: `done` receives submit()'s result, on this
  // thread before submit_async returns or later on another (the cluster gateway holds a request
  // while no task executor is ready, up to its activation timeout, on a thread of its own). The
  // sink may receive events before `done` runs. The default calls submit() inline.
  virtual void submit_async(GenerationRequest request, std::shared_ptr<OutputSink> sink,
                            SubmitDone done) {
    done(submit(std::move(request), std::move(sink)));
  }
  // Cancels a request wherever it is (queued, prefilling, decoding); its blocks are freed within
  // one step and its sink receives a final event with FinishReason::kAbort (if it had not
  // finished already). Unknown or finished keys are ignored.
  virtual void abort(RequestKey key) = 0;
  // Context caches (GenerationRequest::retain_as). The engine is their one owner: it pins their
  // blocks, keeps their descriptions and expires them on its own clock. A cache belongs to the
  // cache_salt it was made with; for any other salt it does not exist.
  //
  // Unpins cache `id` of `salt`; its blocks go back to the pool as ordinary cached blocks. False
  // (nothing done) when it is unknown, expired or another salt's.
  virtual bool release_cache(const std::string& id, const std::string& salt) = 0;
  // Cache `id` when it is live and belongs to `salt`.
  [[nodiscard]] virtual std::optional<ContextCacheInfo> find_cache(
      const std::string& id, const std::string& salt) const = 0;
  // The live caches of `salt`, oldest first.
  [[nodiscard]] virtual std::vector<ContextCacheInfo> list_caches(
      const std::string& salt) const = 0;
  // KV kept across tool calls (GenerationRequest::keep_kv): releases the pin a finished request
  // `key` left (its blocks become ordinary cached blocks); unknown keys are ignored. The front end
  // calls it when the request's output was not a tool call. An engine without pins ignores it.
  virtual void release_kv_pin(RequestKey key) { (void)key; }
  [[nodiscard]] virtual EngineStats stats() const = 0;
  // Histograms and counters for /metrics, as a copy of one moment.
  [[nodiscard]] virtual MetricsSnapshot metrics() const = 0;
  // Stops accepting requests; waits up to `timeout` for in-flight ones, then aborts the rest.
  virtual void drain(std::chrono::milliseconds timeout) = 0;
  // Largest prompt + max_tokens a request may use.
  [[nodiscard]] virtual int64_t max_model_len() const = 0;
  // Most requests that may wait at once (--max-waiting): an HTTP request that expands into more
  // engine requests (prompts × n) can never be queued whole.
  [[nodiscard]] virtual int64_t max_waiting() const = 0;

  // LoRA adapters (vLLM's /v1/load_lora_adapter and /v1/unload_lora_adapter). An engine without
  // adapter support refuses with Unsupported. Loads the GGUF adapter at `path` as `name`:
  // InvalidArgument for a name already loaded or a file that is not a valid adapter for the
  // model (the message says why).
  virtual Status load_lora(const std::string& name, const std::string& path) {
    (void)name;
    (void)path;
    return Status::unsupported("this engine serves no LoRA adapters");
  }
  // Unloads adapter `name` (NotFound when none has it). Requests already submitted with it
  // finish with it; later submits naming it fail with NotFound.
  virtual Status unload_lora(const std::string& name) {
    (void)name;
    return Status::unsupported("this engine serves no LoRA adapters");
  }
  // The loaded adapters, in load order.
  [[nodiscard]] virtual std::vector<LoraInfo> list_loras() const { return {}; }
};

}  // namespace keel::engine
