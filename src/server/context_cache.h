// The server's side of a context cache (POST /v1/caches, DeepServe's MatchByID). The engine owns
// every cache — its pinned KV, its salt, its expiry (EngineClient::find_cache) — and keeps, opaque
// to it, the description the server attached when it made the cache
// (GenerationRequest::retain_description): which endpoint the cache extends, the served model
// name and, for a chat cache, its messages. This file is that description's encoding and the
// cache object the API returns; the server keeps no registry and no clock of its own.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/types.h"
#include "server/chat_formatter.h"
#include "server/generation_request.h"

namespace keel::server {

struct CacheDescription {
  // kChat: made from messages, prefixes a chat request's messages; kCompletion: made from a
  // prompt, prefixes a completion's prompt tokens (the engine's ContextCacheInfo::tokens).
  ApiKind kind = ApiKind::kChat;
  std::string model;                  // served model name
  std::vector<ChatMessage> messages;  // kChat
};

[[nodiscard]] std::string encode_cache_description(const CacheDescription& d);
// nullopt when `text` is not a description this server wrote (the cache is then not served).
[[nodiscard]] std::optional<CacheDescription> decode_cache_description(std::string_view text);

// The object POST /v1/caches and GET /v1/caches/{id} return: {id, object: "cache", model,
// source: "messages"|"prompt", num_tokens, ttl, created, expires_at} (seconds).
[[nodiscard]] nlohmann::json cache_object(const engine::ContextCacheInfo& info,
                                          const CacheDescription& d);

}  // namespace keel::server
