// Context-cache descriptions and cache objects (see context_cache.h).
#include "server/context_cache.h"

#include <exception>

namespace keel::server {
namespace {

using Json = nlohmann::json;

std::optional<std::string> string_field(const Json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) return std::string();
  if (!it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

std::string encode_cache_description(const CacheDescription& d) {
  Json j = {{"source", d.kind == ApiKind::kChat ? "messages" : "prompt"}, {"model", d.model}};
  if (d.kind == ApiKind::kChat) {
    Json messages = Json::array();
    for (const ChatMessage& m : d.messages) {
      Json e = {{"role", m.role}, {"content", m.content}};
      if (!m.name.empty()) e["name"] = m.name;
      if (!m.tool_call_id.empty()) e["tool_call_id"] = m.tool_call_id;
      // As JSON text: the description's objects sort their keys, the calls keep their order.
      if (!m.tool_calls.is_null()) e["tool_calls"] = m.tool_calls.dump();
      messages.push_back(std::move(e));
    }
    j["messages"] = std::move(messages);
  }
  // Message text may hold any bytes the request's JSON did (invalid UTF-8 is replaced, not
  // thrown on): the description round-trips what the parser accepted.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<CacheDescription> decode_cache_description(std::string_view text) {
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return std::nullopt;
  CacheDescription d;
  const std::optional<std::string> source = string_field(j, "source");
  const std::optional<std::string> model = string_field(j, "model");
  if (!source || !model || (*source != "messages" && *source != "prompt")) return std::nullopt;
  d.kind = *source == "messages" ? ApiKind::kChat : ApiKind::kCompletion;
  d.model = *model;
  if (d.kind == ApiKind::kCompletion) return d;
  const auto messages = j.find("messages");
  if (messages == j.end() || !messages->is_array()) return std::nullopt;
  for (const Json& e : *messages) {
    if (!e.is_object()) return std::nullopt;
    ChatMessage m;
    const auto role = string_field(e, "role"), content = string_field(e, "content");
    const auto name = string_field(e, "name"), tool = string_field(e, "tool_call_id");
    if (!role || !content || !name || !tool) return std::nullopt;
    d.messages.push_back({*role, *content, *name, *tool, nullptr});
    if (const auto calls = e.find("tool_calls"); calls != e.end()) {
      if (!calls->is_string()) return std::nullopt;
      auto parsed = nlohmann::ordered_json::parse(calls->get<std::string>(), nullptr, false);
      if (!parsed.is_array()) return std::nullopt;
      d.messages.back().tool_calls = std::move(parsed);
    }
  }
  return d;
}

Json cache_object(const engine::ContextCacheInfo& info, const CacheDescription& d) {
  const int64_t created = info.created_unix_ms / 1000;
  const int64_t ttl = info.ttl_ms / 1000;
  return Json{{"id", info.id},
              {"object", "cache"},
              {"model", d.model},
              {"source", d.kind == ApiKind::kChat ? "messages" : "prompt"},
              {"num_tokens", info.tokens.size()},
              {"ttl", ttl},
              {"created", created},
              {"expires_at", created + ttl}};
}

}  // namespace keel::server
