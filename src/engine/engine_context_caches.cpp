// Engine, context caches (GenerationRequest::retain_as, POST /v1/caches): a finished request's
// blocks stay pinned as a retained table in the scheduler until release or the deadline, which the
// engine thread checks whenever it wakes (an idle engine sleeps until the next deadline).
#include <string>
#include <vector>

#include "core/clock.h"
#include "engine/engine.h"

namespace keel::engine {

void Engine::release_cache(const std::string& id) {
  {
    std::lock_guard lock(mu_);
    inbox_.push_back(ReleaseCache{id});
  }
  wake_.notify_all();
}

void Engine::pin_cache(RequestKey key, const Active& a) {
  drop_cache(a.request.retain_as);  // a cache of the same id is replaced
  scheduler_.retain(key);
  caches_[a.request.retain_as] =
      ContextCache{key, SteadyClock().now_ns() + a.request.retain_ms * 1'000'000, a.cache_blocks};
}

void Engine::drop_cache(const std::string& id) {
  const auto it = caches_.find(id);
  if (it == caches_.end()) return;
  scheduler_.release_retained(it->second.key);
  cache_blocks_reserved_.fetch_sub(it->second.reserved_blocks);
  caches_.erase(it);
}

void Engine::expire_caches() {
  const int64_t t = SteadyClock().now_ns();
  std::vector<std::string> expired;
  for (const auto& [id, c] : caches_) {
    if (c.deadline_ns <= t) expired.push_back(id);
  }
  for (const std::string& id : expired) drop_cache(id);
}

}  // namespace keel::engine
