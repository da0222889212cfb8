// The shared finish rule and finished-request metrics (finish_rule.h).
#include "engine/finish_rule.h"

#include <algorithm>

#include "engine/steady_time.h"

namespace keel::engine {

std::optional<FinishReason> finish_rule(const FinishCheck& check, int32_t token,
                                        TokenEvent* event) {
  const GenerationRequest& r = *check.request;
  // Stop strings first: the token that completes one ends the request whatever else it is. A
  // request that ends otherwise flushes the text its decoder still holds, which may complete one.
  if (check.stops != nullptr) event->stop_string = check.stops->push(token);
  if (event->stop_string) return FinishReason::kStop;
  const bool eog =
      std::find(check.eog_ids.begin(), check.eog_ids.end(), token) != check.eog_ids.end();
  const bool stop_id =
      std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
  std::optional<FinishReason> reason;
  if ((eog && !r.ignore_eos) || stop_id) {
    reason = FinishReason::kStop;
  } else if (check.num_generated >= r.max_new_tokens() ||
             static_cast<int64_t>(r.prompt_tokens.size()) + check.num_generated >=
                 check.max_model_len) {
    reason = FinishReason::kLength;
  }
  if (reason && check.stops != nullptr) {
    event->stop_string = check.stops->finish();
    if (event->stop_string) reason = FinishReason::kStop;
  }
  return reason;
}

void observe_finished(Metrics& metrics, FinishReason reason, const GenerationRequest& request,
                      int64_t arrival_ns, int32_t num_generated, int64_t now_ns) {
  metrics.count_finished(reason);
  metrics.e2e_request_latency_seconds.observe(seconds_between(arrival_ns, now_ns));
  metrics.request_prompt_tokens.observe(request.num_original_prompt_tokens());
  metrics.request_generation_tokens.observe(num_generated);
}

}  // namespace keel::engine
