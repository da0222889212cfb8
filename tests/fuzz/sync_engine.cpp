// SyncEngine (see sync_engine.h).
#include "sync_engine.h"

#include <algorithm>

namespace keel::fuzz {

SyncEngine::SyncEngine(std::vector<int32_t> script, int64_t max_model_len)
    : script_(std::move(script)), max_model_len_(max_model_len) {}

Result<engine::RequestKey> SyncEngine::submit(engine::GenerationRequest request,
                                              std::shared_ptr<engine::OutputSink> sink) {
  if (draining_) return Status::unavailable("sync engine: draining");
  if (request.prompt_tokens.empty()) return Status::invalid_argument("sync engine: empty prompt");
  if (request.max_tokens < 1) return Status::invalid_argument("sync engine: max_tokens < 1");
  const engine::RequestKey key = next_key_++;
  const auto num_prompt = static_cast<int32_t>(request.prompt_tokens.size());
  const size_t limit = std::min(script_.size(), static_cast<size_t>(request.max_tokens));
  engine::FinishReason finish =
      limit < script_.size() ? engine::FinishReason::kLength : engine::FinishReason::kStop;
  for (size_t i = 0; i < limit; ++i) {
    engine::TokenEvent ev;
    ev.num_prompt_tokens = num_prompt;
    const int32_t id = script_[i];
    ev.tokens.push_back(id);
    if (const std::optional<int32_t> top = request.sampling.logprobs) {
      sampling::Logprobs lp;
      lp.chosen = {id, -static_cast<float>(i + 1) / 8.0f};
      lp.chosen_rank = 1;
      for (int32_t k = 0; k < *top; ++k) lp.top.push_back({id + k, lp.chosen.logprob - k});
      ev.logprobs.push_back(std::move(lp));
    }
    ++generated_;
    const bool stop_id = std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(),
                                   id) != request.stop_token_ids.end();
    if (stop_id) finish = engine::FinishReason::kStop;
    if (stop_id || i + 1 == limit) {
      ev.finish = finish;
      pin_if_cache(request, key);
    }
    sink->on_event(std::move(ev));
    if (stop_id) return key;
  }
  if (limit == 0) {
    engine::TokenEvent ev;
    ev.num_prompt_tokens = num_prompt;
    ev.finish = finish;
    pin_if_cache(request, key);
    sink->on_event(std::move(ev));
  }
  return key;
}

void SyncEngine::pin_if_cache(const engine::GenerationRequest& r, engine::RequestKey key) {
  if (r.retain_as.empty()) return;
  caches_.put(engine::ContextCacheTable::info_for(r, 0), {key, 0});
}

void SyncEngine::abort(engine::RequestKey /*key: every request has finished already*/) {}

engine::EngineStats SyncEngine::stats() const {
  engine::EngineStats s;
  s.kv_usage = 0.5f;
  s.generation_tokens_total = generated_;
  return s;
}

void SyncEngine::drain(std::chrono::milliseconds /*timeout*/) { draining_ = true; }

}  // namespace keel::fuzz
