// ContextCacheRegistry (see context_cache.h).
#include "server/context_cache.h"

#include <algorithm>

namespace keel::server {

nlohmann::json ContextCache::to_json() const {
  return nlohmann::json{{"id", id},
                        {"object", "cache"},
                        {"model", model},
                        {"source", kind == ApiKind::kChat ? "messages" : "prompt"},
                        {"num_tokens", tokens.size()},
                        {"ttl", ttl_seconds},
                        {"created", created_unix},
                        {"expires_at", expires_unix()}};
}

void ContextCacheRegistry::put(std::shared_ptr<const ContextCache> cache) {
  std::lock_guard lock(mu_);
  std::string id = cache->id;
  entries_[std::move(id)] = std::move(cache);
}

std::shared_ptr<const ContextCache> ContextCacheRegistry::find(std::string_view id,
                                                               Clock::time_point now) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second->expires <= now) return nullptr;
  return it->second;
}

bool ContextCacheRegistry::erase(std::string_view id, Clock::time_point now) {
  std::lock_guard lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  const bool live = it->second->expires > now;
  entries_.erase(it);
  return live;
}

std::vector<std::shared_ptr<const ContextCache>> ContextCacheRegistry::list(Clock::time_point now) {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const ContextCache>> out;
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second->expires <= now) {
      it = entries_.erase(it);
    } else {
      out.push_back(it->second);
      ++it;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->created_unix < b->created_unix; });
  return out;
}

}  // namespace keel::server
