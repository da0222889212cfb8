// Engine finish rules: when a request ends (stop strings, end-of-generation and stop ids, length
// limits), and what ending does — blocks freed or pinned as a context cache, PIC chunk compiles
// ended with their parent, metrics and the final TokenEvent — and when its state is dropped (once
// no step in flight uses it). Runs on the engine thread only.
#include <algorithm>
#include <utility>

#include "engine/engine.h"
#include "engine/resumed_request.h"
#include "engine/steady_time.h"

namespace keel::engine {

void Engine::cancel(RequestKey key) {
  auto it = active_.find(key);
  if (it == active_.end() || it->second.finished) return;
  finish(key, it->second, FinishReason::kAbort, TokenEvent{});
}

void Engine::finish(RequestKey key, Active& a, FinishReason reason, TokenEvent event) {
  if (a.internal) return finish_compile(key, a, reason);
  if (a.pic_pending > 0) {  // ends while its chunks compile: they go too
    a.pic_pending = 0;
    for (RequestKey child : a.pic_children) {
      const auto c = active_.find(child);
      if (c != active_.end() && !c->second.finished) {
        finish_compile(child, c->second, FinishReason::kAbort);
      } else {
        scheduler_.release_retained(child);
      }
    }
  }
  if (a.num_cached_tokens < 0) num_waiting_.fetch_sub(1);  // never scheduled
  if (!a.request.retain_as.empty() &&
      (reason == FinishReason::kStop || reason == FinishReason::kLength)) {
    pin_cache(key, a);  // keeps its blocks
  } else {
    scheduler_.finish(key);  // frees its blocks (a no-op for requests the scheduler dropped)
    cache_blocks_reserved_.fetch_sub(a.cache_blocks);
  }
  a.finished = true;
  const int64_t t = now_ns();
  event.finish = reason;
  event.num_prompt_tokens = a.request.num_original_prompt_tokens();
  event.num_cached_tokens = usage_cached_tokens(a.request, a.num_cached_tokens);
  metrics_.count_finished(reason);
  metrics_.e2e_request_latency_seconds.observe(seconds_between(a.arrival_ns, t));
  metrics_.request_prompt_tokens.observe(a.request.num_original_prompt_tokens());
  metrics_.request_generation_tokens.observe(a.num_generated);
  a.sink->on_event(std::move(event));
  num_active_.fetch_sub(1);
  release_if_done(key);
}

std::optional<FinishReason> Engine::finish_reason(Active& a, int32_t token, TokenEvent* event) {
  const GenerationRequest& r = a.request;
  // Stop strings first: the token that completes one ends the request whatever else it is. A
  // request that ends otherwise flushes the text its decoder still holds, which may complete one.
  if (a.stops != nullptr) event->stop_string = a.stops->push(token);
  if (event->stop_string) return FinishReason::kStop;
  const bool eog = std::find(config_.eog_token_ids.begin(), config_.eog_token_ids.end(), token) !=
                   config_.eog_token_ids.end();
  const bool stop_id =
      std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), token) != r.stop_token_ids.end();
  std::optional<FinishReason> reason;
  if ((eog && !r.ignore_eos) || stop_id) {
    reason = FinishReason::kStop;
  } else if (a.num_generated >= r.max_new_tokens() ||
             static_cast<int64_t>(r.prompt_tokens.size()) + a.num_generated >= max_model_len_) {
    reason = FinishReason::kLength;
  }
  if (reason && a.stops != nullptr) {
    event->stop_string = a.stops->finish();
    if (event->stop_string) reason = FinishReason::kStop;
  }
  return reason;
}

void Engine::release_if_done(RequestKey key) {
  auto it = active_.find(key);
  if (it != active_.end() && it->second.finished && it->second.in_flight == 0) active_.erase(it);
}

}  // namespace keel::engine
