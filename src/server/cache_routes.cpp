// Parsing and the synchronous context-cache routes (see cache_routes.h).
#include "server/cache_routes.h"

#include <fmt/format.h>

#include <charconv>

#include "server/context_cache.h"
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

namespace {

// The caller's cache `id` as this server describes it; nullopt when the engine has no such live
// cache of `salt` (or one this server did not describe).
struct Found {
  engine::ContextCacheInfo info;
  CacheDescription description;
};
std::optional<Found> find_cache(const ServerContext& ctx, const std::string& id,
                                const std::string& salt) {
  std::optional<engine::ContextCacheInfo> info = ctx.deps.engine->find_cache(id, salt);
  if (!info) return std::nullopt;
  std::optional<CacheDescription> d = decode_cache_description(info->description);
  if (!d) return std::nullopt;
  return Found{std::move(*info), std::move(*d)};
}

}  // namespace

HttpResponse handle_cache_list(ServerContext& ctx, std::string_view salt) {
  Json data = Json::array();
  for (const engine::ContextCacheInfo& c : ctx.deps.engine->list_caches(std::string(salt))) {
    if (auto d = decode_cache_description(c.description)) data.push_back(cache_object(c, *d));
  }
  return HttpResponse::json(200, Json{{"object", "list"}, {"data", std::move(data)}}.dump());
}

HttpResponse handle_cache_get(ServerContext& ctx, std::string_view id, std::string_view salt) {
  const std::optional<Found> cache = find_cache(ctx, std::string(id), std::string(salt));
  if (!cache) return HttpResponse::error(cache_not_found(id));
  return HttpResponse::json(200, cache_object(cache->info, cache->description).dump());
}

HttpResponse handle_cache_delete(ServerContext& ctx, std::string_view id, std::string_view salt) {
  // The owner decides: unknown, expired and another salt's caches are all "not found".
  if (!ctx.deps.engine->release_cache(std::string(id), std::string(salt))) {
    return HttpResponse::error(cache_not_found(id));
  }
  return HttpResponse::json(
      200, Json{{"id", id}, {"object", "cache.deleted"}, {"deleted", true}}.dump());
}

std::optional<ApiError> resolve_cache_id(const ServerContext& ctx, GenerationSpec* spec) {
  if (spec->cache_id.empty()) return std::nullopt;
  // A cache belongs to its salt: any other salt, or none, does not see it at all.
  const std::optional<Found> cache = find_cache(ctx, spec->cache_id, spec->cache_salt);
  if (!cache) return cache_not_found(spec->cache_id);
  const ApiKind kind = cache->description.kind;
  if (kind != spec->kind) {
    return ApiError::bad_request(
        fmt::format("context cache `{}` was made from {}; use it with {}", spec->cache_id,
                    kind == ApiKind::kChat ? "messages" : "a prompt",
                    kind == ApiKind::kChat ? "/v1/chat/completions" : "/v1/completions"),
        "cache_id");
  }
  if (kind == ApiKind::kChat) {
    const std::vector<ChatMessage>& m = cache->description.messages;
    spec->messages.insert(spec->messages.begin(), m.begin(), m.end());
  } else {
    spec->prefix_tokens = cache->info.tokens;
  }
  return std::nullopt;
}

}  // namespace keel::server
