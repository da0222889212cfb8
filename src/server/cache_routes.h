// The context-cache endpoints (keel's explicit caching, DeepServe's MatchByID):
//   POST   /v1/caches        {model?, messages | prompt, ttl?, cache_salt?} → cache object
//   GET    /v1/caches        {"object": "list", "data": [cache objects]}
//   GET    /v1/caches/{id}   cache object, 404 cache_not_found when unknown or expired
//   DELETE /v1/caches/{id}   {"id", "object": "cache.deleted", "deleted": true}, or 404
// A cache object: {id, object: "cache", model, source: "messages"|"prompt", num_tokens, ttl,
// created, expires_at}. `ttl`: seconds, an integer in [1, 86400] (default 3600) or a string
// like "300s". Generation requests name a cache with "cache_id"; resolve_cache_id() applies it
// to their spec.
//
// Ownership: a cache belongs to the `cache_salt` it was created with (none is a salt of its own).
// Only requests with that same salt see it: GET/DELETE and the list take the salt from the
// `X-Cache-Salt` header or the `cache_salt` query parameter, generation requests from their body;
// any other salt gets 404 cache_not_found, as for an unknown id, and the list shows only the
// caller's caches. (keel has one API key, so the key does not separate tenants; the salt does.) The
// engine owns the caches and applies this rule and their expiry (EngineClient::find_cache,
// list_caches, release_cache); these routes ask it and keep nothing. The asynchronous half of
// POST (computing and pinning the KV) is run_cache_create() in cache_handler.h.
//
// Thread safety: functions over a ServerContext (the EngineClient is thread-safe).
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

// The caller's salt on GET/DELETE: `X-Cache-Salt`, else the `cache_salt` query parameter, else "".
std::string request_cache_salt(const HttpRequest& req);

HttpResponse handle_cache_list(ServerContext& ctx, std::string_view salt);
HttpResponse handle_cache_get(ServerContext& ctx, std::string_view id, std::string_view salt);
HttpResponse handle_cache_delete(ServerContext& ctx, std::string_view id, std::string_view salt);

// Applies spec->cache_id: chat caches prepend their messages, prompt caches set prefix_tokens.
// 404 for an unknown or expired id or one of another salt (the request's cache_salt must equal
// the cache's), 400 when the cache's kind does not match the endpoint.
std::optional<ApiError> resolve_cache_id(const ServerContext& ctx, GenerationSpec* spec);

ApiError cache_not_found(std::string_view id);

}  // namespace keel::server
