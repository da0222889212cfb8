// Engine, context caches (GenerationRequest::retain_as, POST /v1/caches): a finished request's
// blocks stay pinned as a retained table in the scheduler while its cache is in caches_ (the one
// registry: callers find, list and remove caches there, on any thread). The engine thread unpins
// a cache when a caller removed it (a ReleasePin message), when a cache of the same id replaces
// it, or at its deadline, which it checks whenever it wakes (an idle engine sleeps until the next
// deadline). Deadlines are on clock_, the only clock caches expire on.
#include <chrono>
#include <string>
#include <vector>

#include "engine/engine.h"

namespace keel::engine {

bool Engine::release_cache(const std::string& id, const std::string& salt) {
  const std::optional<ContextCacheTable::Pin> pin = caches_.remove(id, salt);
  if (!pin) return false;
  {
    MutexLock lock(mu_);
    inbox_.push_back(ReleasePin{*pin});
  }
  wake_.notify_all();
  return true;
}

void Engine::pin_cache(RequestKey key, const EngineRequest& a) {
  scheduler_.retain(key);
  ContextCacheInfo info = ContextCacheTable::info_for(
      a.request, std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count());
  // A cache of the same id is replaced: its blocks are released, not leaked.
  if (auto replaced = caches_.put(std::move(info), {key, a.cache_blocks})) unpin(*replaced);
}

void Engine::unpin(const ContextCacheTable::Pin& pin) {
  scheduler_.release_retained(pin.key);
  cache_blocks_reserved_.fetch_sub(pin.reserved_blocks);
}

void Engine::expire_caches() {
  for (const ContextCacheTable::Pin& pin : caches_.take_expired()) unpin(pin);
}

}  // namespace keel::engine
