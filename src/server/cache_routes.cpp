// Parsing and the synchronous context-cache routes (see cache_routes.h).
#include "server/cache_routes.h"

#include <fmt/format.h>

#include <charconv>

#include "server/http_framing.h"
#include "server/json_fields.h"

namespace keel::server {
namespace {

// `ttl`: integer seconds, or a string of integer seconds ending in "s" (Gemini's form).
MaybeError parse_ttl(const Json& body, int64_t* out) {
  const Json* ttl = field(body, "ttl");
  if (ttl == nullptr) return std::nullopt;
  std::optional<int64_t> seconds;
  if (ttl->is_string()) {
    std::string_view text = ttl->get_ref<const std::string&>();
    if (text.ends_with('s')) text.remove_suffix(1);
    int64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size() && !text.empty()) seconds = v;
  } else if (ttl->is_number()) {
    seconds = as_integer(*ttl);
  }
  if (!seconds || *seconds < 1 || *seconds > kMaxCacheTtlSeconds) {
    return ApiError::bad_request(
        fmt::format("`ttl` must be a whole number of seconds in [1, {}] (e.g. 600 or \"600s\"), "
                    "got {}",
                    kMaxCacheTtlSeconds, describe_value(*ttl)),
        "ttl");
  }
  *out = *seconds;
  return std::nullopt;
}

}  // namespace

ApiError cache_not_found(std::string_view id) {
  ApiError e = ApiError::from_status(
      Status::not_found(fmt::format("No context cache `{}` (unknown, deleted or expired).", id)),
      "cache_id");
  e.code = "cache_not_found";
  return e;
}

ApiResult<CacheSpec> parse_cache_request(const Json& body, int32_t vocab_size) {
  if (!body.is_object()) return type_error("body", "a JSON object", body);
  CacheSpec spec;
  std::optional<std::string> s;
  KEEL_API_TRY(read_string(body, "model", &s));
  if (s) spec.model = std::move(*s);
  const Json* messages = field(body, "messages");
  const Json* prompt = field(body, "prompt");
  if ((messages == nullptr) == (prompt == nullptr)) {
    return ApiError::bad_request("give exactly one of `messages` and `prompt`", "messages");
  }
  if (messages != nullptr) {
    ApiResult<std::vector<ChatMessage>> m = parse_messages(*messages);
    if (!m.ok()) return m.error();
    spec.kind = ApiKind::kChat;
    spec.messages = std::move(m.value());
  } else {
    ApiResult<std::vector<PromptInput>> p = parse_prompt(*prompt, vocab_size);
    if (!p.ok()) return p.error();
    if (p.value().size() != 1) {
      return ApiError::bad_request("`prompt` must be one prompt (a string or token ids)", "prompt");
    }
    spec.kind = ApiKind::kCompletion;
    spec.prompt = std::move(p.value().front());
  }
  KEEL_API_TRY(parse_ttl(body, &spec.ttl_seconds));
  KEEL_API_TRY(parse_cache_salt(body, &spec.cache_salt));
  return spec;
}

std::string request_cache_salt(const HttpRequest& req) {
  if (req.has_header("x-cache-salt")) return std::string(req.header("x-cache-salt"));
  const size_t q = req.target.find('?');
  if (q == std::string::npos) return {};
  std::string_view query = std::string_view(req.target).substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (pair.starts_with("cache_salt=")) return percent_decode(pair.substr(11));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

HttpResponse handle_cache_list(ServerContext& ctx, std::string_view salt) {
  Json data = Json::array();
  for (const auto& c : ctx.caches.list(ContextCache::Clock::now())) {
    if (c->cache_salt == salt) data.push_back(c->to_json());
  }
  return HttpResponse::json(200, Json{{"object", "list"}, {"data", std::move(data)}}.dump());
}

HttpResponse handle_cache_get(ServerContext& ctx, std::string_view id, std::string_view salt) {
  const auto cache = ctx.caches.find(id, ContextCache::Clock::now());
  if (cache == nullptr || cache->cache_salt != salt)
    return HttpResponse::error(cache_not_found(id));
  return HttpResponse::json(200, cache->to_json().dump());
}

HttpResponse handle_cache_delete(ServerContext& ctx, std::string_view id, std::string_view salt) {
  const auto now = ContextCache::Clock::now();
  const auto cache = ctx.caches.find(id, now);
  if (cache == nullptr || cache->cache_salt != salt)
    return HttpResponse::error(cache_not_found(id));
  const bool live = ctx.caches.erase(id, now);
  ctx.deps.engine->release_cache(std::string(id));
  if (!live) return HttpResponse::error(cache_not_found(id));
  return HttpResponse::json(
      200, Json{{"id", id}, {"object", "cache.deleted"}, {"deleted", true}}.dump());
}

std::optional<ApiError> resolve_cache_id(const ServerContext& ctx, GenerationSpec* spec) {
  if (spec->cache_id.empty()) return std::nullopt;
  const auto cache = ctx.caches.find(spec->cache_id, ContextCache::Clock::now());
  // A cache belongs to its salt: any other salt, or none, does not see it at all.
  if (cache == nullptr || cache->cache_salt != spec->cache_salt) {
    return cache_not_found(spec->cache_id);
  }
  if (cache->kind != spec->kind) {
    return ApiError::bad_request(
        fmt::format("context cache `{}` was made from {}; use it with {}", cache->id,
                    cache->kind == ApiKind::kChat ? "messages" : "a prompt",
                    cache->kind == ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions"),
        "cache_id");
  }
  if (cache->kind == ApiKind::kChat) {
    spec->messages.insert(spec->messages.begin(), cache->messages.begin(), cache->messages.end());
  } else {
    spec->prefix_tokens = cache->tokens;
  }
  return std::nullopt;
}

}  // namespace keel::server
