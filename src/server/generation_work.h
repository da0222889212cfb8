// GenerationWork: one generation as the connection's driver (run_generation_work,
// generation_handler.h) sees it — engine requests to place, events to consume, and the bytes to
// write at the start, the end and on failure. Implementations: the chat/completions choices
// (generation_handler.cpp) and a Responses API run (responses_run.h), whose bodies and streamed
// events differ while placing, the event loop, disconnects and timeouts are shared.
//
// Thread safety: one owner (the connection's strand).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "engine/types.h"
#include "server/api_error.h"

namespace keel::server {

// One generation as the driver sees it: engine requests to place, events to consume, and the
// bytes to write at the start, the end and on failure. Implementations: the chat/completions
// choices (generation_handler.cpp) and a Responses API run (responses_run.h).
class GenerationWork {
 public:
  virtual ~GenerationWork() = default;
  [[nodiscard]] virtual size_t num_choices() const = 0;
  [[nodiscard]] virtual engine::GenerationRequest request(size_t choice) const = 0;
  virtual void placed(size_t choice, engine::RequestKey key) = 0;
  // One engine event; appends what it streams to `sse` (nothing when not streaming).
  virtual void consume(size_t choice, engine::TokenEvent event, std::string* sse) = 0;
  // Aborts every placed, unfinished engine request. Idempotent.
  virtual void abort_unfinished() = 0;
  [[nodiscard]] virtual bool all_done() const = 0;
  [[nodiscard]] virtual const std::optional<ApiError>& failure() const = 0;
  [[nodiscard]] virtual bool streaming() const = 0;
  [[nodiscard]] virtual const std::string& request_id() const = 0;
  // Streaming: the events sent right after the 200 headers ("" for chat/completions).
  virtual std::string stream_head() = 0;
  // After all_done() without failure: the stream's last events, or the JSON body of the 200.
  virtual std::string stream_tail() = 0;
  virtual std::string final_body() = 0;
  // A failure after the stream started: the events that end it.
  virtual std::string stream_error(const ApiError& error) = 0;
};

}  // namespace keel::server
