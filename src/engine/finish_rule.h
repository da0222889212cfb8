// The finish rule of a generated token and the metrics of a finished request, shared by every
// engine kind (engine.h, semi_pd_engine.h) so that a request ends on the same token, for the same
// reason, and is counted the same way whichever engine serves it:
//   1. a stop string the token completes (StopStringDetector) → kStop, whatever else it is;
//   2. an end-of-generation id (unless ignore_eos) or one of the request's stop ids → kStop;
//   3. max_tokens generated, or the context full (prompt + generated ≥ max_model_len) → kLength;
//   4. on 2 or 3, the text the stop detector still holds is flushed: a stop string it completes
//      makes the reason kStop.
// Thread safety: pure functions, except that finish_rule() feeds the request's detector.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "engine/metrics.h"
#include "engine/stop_strings.h"
#include "engine/types.h"

namespace keel::engine {

// What the rule reads of a request after a token was generated.
struct FinishCheck {
  const GenerationRequest* request = nullptr;
  int32_t num_generated = 0;            // counting the token being checked
  std::span<const int32_t> eog_ids;     // the model's end-of-generation ids
  int64_t max_model_len = 0;            // the engine's context length
  StopStringDetector* stops = nullptr;  // the request's stop strings; null = none
};

// The reason `token` ends the request; nullopt: it goes on. Sets event->stop_string when a stop
// string decides.
[[nodiscard]] std::optional<FinishReason> finish_rule(const FinishCheck& check, int32_t token,
                                                      TokenEvent* event);

// Counts a finished request in `metrics`: its reason, end-to-end latency (arrival to `now_ns`),
// prompt and generated tokens.
void observe_finished(Metrics& metrics, FinishReason reason, const GenerationRequest& request,
                      int64_t arrival_ns, int32_t num_generated, int64_t now_ns);

}  // namespace keel::engine
