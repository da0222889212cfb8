// One batch line run as one engine request set: its body goes through the same validation
// (generation_spec_for), prompt preparation and GenerationChoices as a non-streamed HTTP call,
// on the calling batch worker thread, which blocks on a LineInbox until the engine's events
// arrive. The result is the line of the output file (200 and the body a normal call returns) or
// of the error file (the status and OpenAI error body the call would have got); `stream: true`
// is a 400 for that line.
//
// Cancellation: LineInbox::cancel() (any thread) wakes the worker, which aborts the line's engine
// requests and reports kCancelled. Every engine request is finished or aborted when
// run_batch_line returns; the engine may still hold the inbox's sinks (they outlive it harmlessly).
//
// Thread safety: run_batch_line on one worker thread; LineInbox members on any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "core/mutex.h"
#include "engine/types.h"
#include "server/batch_input.h"
#include "server/generation_request.h"
#include "server/server_context.h"

namespace keel::server {

class LineInbox : public std::enable_shared_from_this<LineInbox> {
 public:
  using Clock = std::chrono::steady_clock;
  struct Item {
    size_t choice = 0;
    engine::TokenEvent event;
  };

  // A sink delivering into this inbox under choice index `choice`.
  std::shared_ptr<engine::OutputSink> make_sink(size_t choice);
  void cancel();
  // Stops delivery: later events are dropped. Idempotent.
  void close();
  // Waits until events are queued, cancel() was called or `deadline` passed; moves the queued
  // events into `out`. Returns false when cancelled.
  bool wait(Clock::time_point deadline, std::deque<Item>* out);

 private:
  class Sink;
  void deliver(size_t choice, engine::TokenEvent event);

  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_ KEEL_GUARDED_BY(mu_);
  bool cancelled_ KEEL_GUARDED_BY(mu_) = false;
  bool closed_ KEEL_GUARDED_BY(mu_) = false;
};

struct BatchLineResult {
  enum class Kind { kCompleted, kFailed, kCancelled };
  Kind kind = Kind::kFailed;
  std::string jsonl;  // the output or error file line (no newline); empty when cancelled
};

BatchLineResult run_batch_line(ServerContext& ctx, ApiKind kind, const BatchLine& line,
                               const std::shared_ptr<LineInbox>& inbox);

// The output/error file line for `custom_id`: {"id": "batch_req_<request_id>", "custom_id",
// "response": {"status_code", "request_id", "body"}, "error": null}; `body` is JSON text.
std::string batch_output_line(std::string_view request_id, std::string_view custom_id,
                              int status_code, std::string_view body);

}  // namespace keel::server
