// Response bodies and SSE events (see response_builder.h).
#include "server/response_builder.h"

#include <cmath>

namespace keel::server {
namespace {

using Json = nlohmann::json;

// OpenAI's stand-in for impossible tokens (JSON has no -inf).
constexpr double kMinLogprob = -9999.0;

double finite_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : kMinLogprob;
}

Json bytes_of(const std::string& s) {
  Json arr = Json::array();
  for (char c : s) arr.push_back(static_cast<int>(static_cast<unsigned char>(c)));
  return arr;
}

Json chat_token_json(const TopLogprob& t) {
  return Json{
      {"token", t.text}, {"logprob", finite_logprob(t.logprob)}, {"bytes", bytes_of(t.text)}};
}

const char* object_name(ApiKind kind, bool chunk) {
  if (kind == ApiKind::kChat) return chunk ? "chat.completion.chunk" : "chat.completion";
  return "text_completion";
}

Json envelope(const ResponseMeta& meta, bool chunk) {
  return Json{{"id", meta.id},
              {"object", object_name(meta.kind, chunk)},
              {"created", meta.created},
              {"model", meta.model}};
}

Json logprobs_json(ApiKind kind, bool has, std::span<const LogprobEntry> entries) {
  if (!has) return nullptr;
  return kind == ApiKind::kChat ? chat_logprobs_json(entries) : completion_logprobs_json(entries);
}

Json optional_string(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }

}  // namespace

std::string dump_json(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json Usage::to_json() const {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

Json chat_logprobs_json(std::span<const LogprobEntry> entries) {
  Json content = Json::array();
  for (const LogprobEntry& e : entries) {
    Json item = chat_token_json(e.chosen);
    Json top = Json::array();
    for (const TopLogprob& t : e.top) top.push_back(chat_token_json(t));
    item["top_logprobs"] = std::move(top);
    content.push_back(std::move(item));
  }
  return Json{{"content", std::move(content)}, {"refusal", nullptr}};
}

Json completion_logprobs_json(std::span<const LogprobEntry> entries) {
  Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(),
       offsets = Json::array();
  for (const LogprobEntry& e : entries) {
    tokens.push_back(e.chosen.text);
    token_logprobs.push_back(finite_logprob(e.chosen.logprob));
    Json top = Json::object();
    for (const TopLogprob& t : e.top) top[t.text] = finite_logprob(t.logprob);
    top[e.chosen.text] = finite_logprob(e.chosen.logprob);
    top_logprobs.push_back(std::move(top));
    offsets.push_back(e.text_offset);
  }
  return Json{{"tokens", std::move(tokens)},
              {"token_logprobs", std::move(token_logprobs)},
              {"top_logprobs", std::move(top_logprobs)},
              {"text_offset", std::move(offsets)}};
}

Json tool_calls_json(std::span<const ToolCall> calls) {
  Json arr = Json::array();
  for (const ToolCall& c : calls) {
    arr.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return arr;
}

Json tool_call_start_delta(size_t index, const ToolCall& call) {
  return Json::array({Json{{"index", index},
                           {"id", call.id},
                           {"type", "function"},
                           {"function", {{"name", call.name}, {"arguments", ""}}}}});
}

Json tool_call_arguments_delta(size_t index, std::string_view fragment) {
  return Json::array({Json{{"index", index}, {"function", {{"arguments", fragment}}}}});
}

std::string completion_body(const ResponseMeta& meta, std::span<const FinishedChoice> choices,
                            const Usage& usage) {
  Json body = envelope(meta, false);
  Json arr = Json::array();
  for (const FinishedChoice& c : choices) {
    Json choice = {{"index", c.index}};
    if (meta.kind == ApiKind::kChat) {
      choice["message"] = {{"role", "assistant"},
                           {"content", c.content_null ? Json(nullptr) : Json(c.text)}};
      if (!c.tool_calls.is_null()) choice["message"]["tool_calls"] = c.tool_calls;
      if (c.reasoning) {
        choice["message"]["reasoning_content"] = *c.reasoning;
        choice["message"]["reasoning"] = *c.reasoning;
      }
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = logprobs_json(meta.kind, c.has_logprobs, c.logprobs);
    choice["finish_reason"] = c.finish_reason;
    choice["stop_reason"] = optional_string(c.stop_reason);
    arr.push_back(std::move(choice));
  }
  body["choices"] = std::move(arr);
  body["usage"] = usage.to_json();
  return dump_json(body);
}

std::string chunk_event(const ResponseMeta& meta, const ChunkChoice& c, bool include_usage) {
  Json body = envelope(meta, true);
  Json choice = {{"index", c.index}};
  if (meta.kind == ApiKind::kChat) {
    Json delta = Json::object();
    if (c.role) delta["role"] = "assistant";
    if (c.reasoning) {
      delta["reasoning_content"] = *c.reasoning;
      delta["reasoning"] = *c.reasoning;
    }
    if (c.text) delta["content"] = *c.text;
    if (!c.tool_calls.is_null()) delta["tool_calls"] = c.tool_calls;
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = c.text.value_or("");
  }
  choice["logprobs"] = logprobs_json(meta.kind, c.has_logprobs && !c.logprobs.empty(), c.logprobs);
  choice["finish_reason"] = optional_string(c.finish_reason);
  if (c.finish_reason) choice["stop_reason"] = optional_string(c.stop_reason);
  body["choices"] = Json::array({std::move(choice)});
  if (include_usage) body["usage"] = nullptr;
  return "data: " + dump_json(body) + "\n\n";
}

std::string usage_event(const ResponseMeta& meta, const Usage& usage) {
  Json body = envelope(meta, true);
  body["choices"] = Json::array();
  body["usage"] = usage.to_json();
  return "data: " + dump_json(body) + "\n\n";
}

std::string error_event(const ApiError& error) { return "data: " + error.body() + "\n\n"; }

}  // namespace keel::server
