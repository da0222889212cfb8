// The context-cache endpoints (keel's explicit caching, DeepServe's MatchByID):
//   POST   /v1/caches        {model?, messages | prompt, ttl?, cache_salt?} → cache object
//   GET    /v1/caches        {"object": "list", "data": [cache objects]}
//   GET    /v1/caches/{id}   cache object, 404 cache_not_found when unknown or expired
//   DELETE /v1/caches/{id}   {"id", "object": "cache.deleted", "deleted": true}, or 404
// A cache object: {id, object: "cache", model, source: "messages"|"prompt", num_tokens, ttl,
// created, expires_at}. `ttl`: seconds, an integer in [1, 86400] (default 3600) or a string
// like "300s". Generation requests name a cache with "cache_id"; resolve_cache_id() applies it
// to their spec. The asynchronous half of POST (computing and pinning the KV) is
// run_cache_create() in cache_handler.h.
//
// Thread safety: functions over a ServerContext whose registry is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/generation_request.h"
#include "server/http_message.h"
#include "server/server_context.h"

namespace keel::server {

// A validated POST /v1/caches body.
struct CacheSpec {
  ApiKind kind = ApiKind::kChat;  // kChat: from messages; kCompletion: from prompt
  std::string model;
  std::vector<ChatMessage> messages;
  PromptInput prompt;
  int64_t ttl_seconds = 3600;
  std::string cache_salt;
};

inline constexpr int64_t kDefaultCacheTtlSeconds = 3600;
inline constexpr int64_t kMaxCacheTtlSeconds = 86400;

ApiResult<CacheSpec> parse_cache_request(const nlohmann::json& body, int32_t vocab_size);

HttpResponse handle_cache_list(ServerContext& ctx);
HttpResponse handle_cache_get(ServerContext& ctx, std::string_view id);
HttpResponse handle_cache_delete(ServerContext& ctx, std::string_view id);

// Applies spec->cache_id: chat caches prepend their messages, prompt caches set prefix_tokens;
// the cache's salt becomes the request's. 404 for an unknown or expired id, 400 when the cache's
// kind does not match the endpoint or the request names another cache_salt.
std::optional<ApiError> resolve_cache_id(const ServerContext& ctx, GenerationSpec* spec);

ApiError cache_not_found(std::string_view id);

}  // namespace keel::server
