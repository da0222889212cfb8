// ContextCacheRegistry: the explicit context caches of POST /v1/caches (DeepServe's MatchByID).
// An entry names a token sequence whose KV the engine keeps pinned (GenerationRequest::retain_as)
// and how requests extend it: a cache made from `messages` prefixes a chat request's messages; a
// cache made from `prompt` prefixes a completion's prompt tokens. The registry holds the
// server's view (id → tokens, expiry); the engine holds the blocks and expires them on its own
// clock at the same deadline, so an entry past its deadline is never returned.
//
// Thread safety: every method may be called from any thread (one mutex; entries are immutable
// and shared).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_formatter.h"
#include "server/generation_request.h"

namespace keel::server {

struct ContextCache {
  using Clock = std::chrono::steady_clock;
  std::string id;                     // "cache-<hex>"
  std::string model;                  // served model name
  ApiKind kind = ApiKind::kChat;      // kChat: made from messages; kCompletion: from a prompt
  std::vector<ChatMessage> messages;  // kChat
  std::vector<int32_t> tokens;        // the cached sequence as the engine computed it
  std::string cache_salt;
  int64_t ttl_seconds = 0;
  int64_t created_unix = 0;
  Clock::time_point expires;

  [[nodiscard]] int64_t expires_unix() const { return created_unix + ttl_seconds; }
  // The object GET /v1/caches/{id} returns.
  [[nodiscard]] nlohmann::json to_json() const;
};

class ContextCacheRegistry {
 public:
  using Clock = ContextCache::Clock;

  void put(std::shared_ptr<const ContextCache> cache);  // replaces an entry of the same id
  // The entry, or nullptr when unknown or expired at `now`.
  [[nodiscard]] std::shared_ptr<const ContextCache> find(std::string_view id,
                                                         Clock::time_point now) const;
  // Removes the entry; false when unknown or expired.
  bool erase(std::string_view id, Clock::time_point now);
  // Live entries, oldest first (expired ones are dropped from the registry).
  [[nodiscard]] std::vector<std::shared_ptr<const ContextCache>> list(Clock::time_point now);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const ContextCache>, std::less<>> entries_;
};

}  // namespace keel::server
