// EngineClient: what a front end (the HTTP server, tests) may ask of an engine. Every method is
// thread-safe; the engine's own thread owns all engine state and learns of calls through
// messages. The real implementation is Engine (engine.h); tests use fakes.
#pragma once

#include <chrono>
#include <memory>
#include <string>

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
  // Cancels a request wherever it is (queued, prefilling, decoding); its blocks are freed within
  // one step and its sink receives a final event with FinishReason::kAbort (if it had not
  // finished already). Unknown or finished keys are ignored.
  virtual void abort(RequestKey key) = 0;
  // Unpins context cache `id` (GenerationRequest::retain_as); its blocks go back to the pool as
  // ordinary cached blocks. Unknown ids are ignored.
  virtual void release_cache(const std::string& id) = 0;
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
};

}  // namespace keel::engine
