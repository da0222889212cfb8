// Engine finish rules: when a request ends (stop strings, end-of-generation and stop ids, length
// limits), and what ending does — blocks freed, pinned as a context cache or kept across a tool
// call (engine_kv_pins.cpp), PIC chunk compiles ended with their parent, metrics and the final
// TokenEvent — and when its state is dropped (once
// no step in flight uses it). Runs on the engine thread only.
#include <algorithm>
#include <utility>

#include "engine/engine.h"
#include "engine/finish_rule.h"
#include "engine/resumed_request.h"
#include "engine/steady_time.h"

namespace keel::engine {

void Engine::cancel(RequestKey key) {
  auto it = active_.find(key);
  if (it == active_.end() || it->second.finished) return;
  finish(key, it->second, FinishReason::kAbort, TokenEvent{});
}

void Engine::finish(RequestKey key, EngineRequest& a, FinishReason reason, TokenEvent event) {
  if (a.pic.internal) return finish_compile(key, a, reason);
  if (a.pic.pending > 0) {  // ends while its chunks compile: they go too
    a.pic.pending = 0;
    for (RequestKey child : a.pic.children) {
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
    if (a.request.keep_kv && reason == FinishReason::kStop) pin_kv(key, a);  // before the free
    scheduler_.finish(key);  // frees its blocks (a no-op for requests the scheduler dropped)
    cache_blocks_reserved_.fetch_sub(a.cache_blocks);
  }
  a.finished = true;
  const int64_t t = now_ns();
  event.finish = reason;
  event.num_prompt_tokens = a.request.num_original_prompt_tokens();
  event.num_cached_tokens = usage_cached_tokens(a.request, a.num_cached_tokens);
  observe_finished(metrics_, reason, a.request, a.arrival_ns, a.num_generated, t);
  a.sink->on_event(std::move(event));
  num_active_.fetch_sub(1);
  release_if_done(key);
}

std::optional<FinishReason> Engine::finish_reason(EngineRequest& a, int32_t token,
                                                  TokenEvent* event) {
  const FinishCheck check{&a.request, a.num_generated, config_.eog_token_ids, max_model_len_,
                          a.stops.get()};
  return finish_rule(check, token, event);
}

void Engine::release_if_done(RequestKey key) {
  auto it = active_.find(key);
  if (it != active_.end() && it->second.finished && it->second.in_flight == 0) active_.erase(it);
}

}  // namespace keel::engine
