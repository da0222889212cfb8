// ContextCacheTable (see context_cache_table.h).
#include "engine/context_cache_table.h"

#include <algorithm>
#include <utility>

namespace keel::engine {

ContextCacheInfo ContextCacheTable::info_for(const GenerationRequest& request,
                                             int64_t created_unix_ms) {
  ContextCacheInfo info;
  info.id = request.retain_as;
  info.cache_salt = request.cache_salt;
  info.tokens.assign(request.prompt_tokens.begin(),  // the prompt the client sent
                     request.prompt_tokens.end() - request.resumed_tokens);
  info.description = request.retain_description;
  info.ttl_ms = request.retain_ms;
  info.created_unix_ms = created_unix_ms;
  return info;
}

std::optional<ContextCacheTable::Pin> ContextCacheTable::put(ContextCacheInfo info, Pin pin) {
  MutexLock lock(mu_);
  Entry e;
  e.deadline_ns = clock_->now_ns() + info.ttl_ms * 1'000'000;
  e.seq = next_seq_++;
  e.pin = pin;
  std::string id = info.id;
  e.info = std::move(info);
  std::optional<Pin> replaced;
  auto [it, inserted] = entries_.try_emplace(std::move(id));
  if (!inserted) replaced = it->second.pin;
  it->second = std::move(e);
  return replaced;
}

std::optional<ContextCacheInfo> ContextCacheTable::find(std::string_view id,
                                                        std::string_view salt) const {
  MutexLock lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.info.cache_salt != salt || !live(it->second)) {
    return std::nullopt;
  }
  return it->second.info;
}

std::vector<ContextCacheInfo> ContextCacheTable::list(std::string_view salt) const {
  std::vector<const Entry*> found;
  MutexLock lock(mu_);
  for (const auto& [id, e] : entries_) {
    if (e.info.cache_salt == salt && live(e)) found.push_back(&e);
  }
  std::sort(found.begin(), found.end(),
            [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
  std::vector<ContextCacheInfo> out;
  out.reserve(found.size());
  for (const Entry* e : found) out.push_back(e->info);
  return out;
}

std::optional<ContextCacheTable::Pin> ContextCacheTable::remove(std::string_view id,
                                                                std::string_view salt) {
  MutexLock lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end() || it->second.info.cache_salt != salt || !live(it->second)) {
    return std::nullopt;
  }
  const Pin pin = it->second.pin;
  entries_.erase(it);
  return pin;
}

std::vector<ContextCacheTable::Pin> ContextCacheTable::take_expired() {
  std::vector<Pin> out;
  MutexLock lock(mu_);
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (live(it->second)) {
      ++it;
    } else {
      out.push_back(it->second.pin);
      it = entries_.erase(it);
    }
  }
  return out;
}

std::optional<int64_t> ContextCacheTable::next_deadline_ns() const {
  MutexLock lock(mu_);
  std::optional<int64_t> out;
  for (const auto& [id, e] : entries_) {
    if (!out || e.deadline_ns < *out) out = e.deadline_ns;
  }
  return out;
}

std::vector<ContextCacheTable::Pin> ContextCacheTable::pins() const {
  MutexLock lock(mu_);
  std::vector<Pin> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_) out.push_back(e.pin);
  return out;
}

}  // namespace keel::engine
