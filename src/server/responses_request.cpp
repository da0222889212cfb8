// parse_responses_request (see responses_request.h).
#include "server/responses_request.h"

#include <fmt/format.h>

#include <array>
#include <limits>

#include "server/generation_request.h"
#include "server/responses_items.h"

namespace keel::server {
namespace {

constexpr std::array<std::string_view, 11> kBuiltinTools = {
    "web_search",           "web_search_preview", "file_search", "code_interpreter", "computer_use",
    "computer_use_preview", "image_generation",   "mcp",         "local_shell",      "shell",
    "apply_patch"};
constexpr size_t kMaxMetadataKeys = 16;
constexpr size_t kMaxMetadataKeyBytes = 64;
constexpr size_t kMaxMetadataValueBytes = 512;
constexpr size_t kMaxResponseIdBytes = 128;
constexpr size_t kMaxResponseTools = 128;

const OrderedJson* ordered_field(const OrderedJson& obj, std::string_view name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

ApiError unsupported_field(std::string message, std::string param) {
  return ApiError::bad_request(std::move(message), std::move(param), "unsupported_value");
}

// One Responses function tool → its chat form.
ApiResult<OrderedJson> chat_function_tool(const OrderedJson& tool, size_t i) {
  const std::string where = fmt::format("tools[{}]", i);
  if (!tool.is_object())
    return ApiError::bad_request(fmt::format("`{}` must be an object", where), where);
  const OrderedJson* type = ordered_field(tool, "type");
  if (type == nullptr || !type->is_string()) {
    return ApiError::bad_request(fmt::format("`{}.type` must be a string", where), where + ".type");
  }
  const std::string t = type->get<std::string>();
  if (t != "function") {
    const bool builtin = is_builtin_tool_type(t);
    return ApiError::bad_request(
        builtin ? fmt::format("The built-in tool type `{}` is not supported by this server; only "
                              "`function` tools are (run the tool yourself and send its result "
                              "as a function_call_output item).",
                              t)
                : fmt::format("Unknown tool type `{}`; only `function` tools are supported.", t),
        where + ".type", "unsupported_tool");
  }
  OrderedJson function = OrderedJson::object();
  for (std::string_view key : {"name", "description", "parameters", "strict"}) {
    if (const OrderedJson* v = ordered_field(tool, key)) function[std::string(key)] = *v;
  }
  return OrderedJson{{"type", "function"}, {"function", std::move(function)}};
}

MaybeError parse_response_tools(const OrderedJson& ordered, ResponsesRequest* out) {
  const OrderedJson* tools = ordered_field(ordered, "tools");
  if (tools == nullptr) return std::nullopt;
  if (!tools->is_array()) return ApiError::bad_request("`tools` must be an array", "tools");
  if (tools->size() > kMaxResponseTools) {
    return ApiError::bad_request(
        fmt::format("`tools` may hold at most {} tools", kMaxResponseTools), "tools");
  }
  OrderedJson chat = OrderedJson::array();
  for (size_t i = 0; i < tools->size(); ++i) {
    ApiResult<OrderedJson> t = chat_function_tool((*tools)[i], i);
    if (!t.ok()) return t.error();
    chat.push_back(std::move(t.value()));
  }
  out->tools = *tools;
  if (!chat.empty()) out->chat_fields["tools"] = std::move(chat);
  return std::nullopt;
}

MaybeError parse_response_tool_choice(const OrderedJson& ordered, ResponsesRequest* out) {
  const OrderedJson* choice = ordered_field(ordered, "tool_choice");
  if (choice == nullptr) return std::nullopt;
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c != "none" && c != "auto" && c != "required") {
      return ApiError::bad_request(
          fmt::format("`tool_choice` must be \"none\", \"auto\", \"required\" or "
                      "{{\"type\": \"function\", \"name\": ...}}; got \"{}\"",
                      c),
          "tool_choice");
    }
    out->tool_choice = c;
    out->chat_fields["tool_choice"] = c;
    return std::nullopt;
  }
  const OrderedJson* type = choice->is_object() ? ordered_field(*choice, "type") : nullptr;
  const OrderedJson* name = choice->is_object() ? ordered_field(*choice, "name") : nullptr;
  if (type == nullptr || *type != "function" || name == nullptr || !name->is_string()) {
    return unsupported_field(
        "`tool_choice` must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
        "\"name\": ...} (built-in tools and allowed_tools are not supported)",
        "tool_choice");
  }
  out->tool_choice = *choice;
  out->chat_fields["tool_choice"] = {{"type", "function"}, {"function", {{"name", *name}}}};
  return std::nullopt;
}

// text.format → response_format.
MaybeError parse_text_format(const OrderedJson& ordered, ResponsesRequest* out) {
  const OrderedJson* text = ordered_field(ordered, "text");
  if (text == nullptr) return std::nullopt;
  if (!text->is_object()) return ApiError::bad_request("`text` must be an object", "text");
  const OrderedJson* format = ordered_field(*text, "format");
  if (format == nullptr) return std::nullopt;
  const OrderedJson* type = format->is_object() ? ordered_field(*format, "type") : nullptr;
  if (type == nullptr || !type->is_string()) {
    return ApiError::bad_request("`text.format.type` must be a string", "text.format.type");
  }
  const std::string t = type->get<std::string>();
  if (t == "json_schema") {
    OrderedJson schema = OrderedJson::object();
    for (std::string_view key : {"name", "description", "schema", "strict"}) {
      if (const OrderedJson* v = ordered_field(*format, key)) schema[std::string(key)] = *v;
    }
    out->chat_fields["response_format"] = {{"type", "json_schema"},
                                           {"json_schema", std::move(schema)}};
  } else if (t == "json_object") {
    out->chat_fields["response_format"] = {{"type", "json_object"}};
  } else if (t != "text") {
    return ApiError::bad_request(
        fmt::format("`text.format.type` must be \"text\", \"json_object\" or \"json_schema\"; "
                    "got \"{}\"",
                    t),
        "text.format.type");
  }
  out->text = {{"format", *format}};
  return std::nullopt;
}

MaybeError parse_response_metadata(const Json& body, ResponsesRequest* out) {
  const Json* metadata = field(body, "metadata");
  if (metadata == nullptr) return std::nullopt;
  if (!metadata->is_object()) return type_error("metadata", "an object", *metadata);
  if (metadata->size() > kMaxMetadataKeys) {
    return ApiError::bad_request(
        fmt::format("`metadata` may hold at most {} keys", kMaxMetadataKeys), "metadata");
  }
  for (const auto& [key, value] : metadata->items()) {
    if (key.size() > kMaxMetadataKeyBytes || !value.is_string() ||
        value.get_ref<const std::string&>().size() > kMaxMetadataValueBytes) {
      return ApiError::bad_request(
          fmt::format("`metadata` keys must be at most {} bytes and its values strings of at "
                      "most {} bytes",
                      kMaxMetadataKeyBytes, kMaxMetadataValueBytes),
          "metadata");
    }
    out->metadata[key] = value.get<std::string>();
  }
  return std::nullopt;
}

// Fields this server does not implement: a 400 when they ask for something.
MaybeError refuse_unsupported_fields(const Json& body) {
  if (const Json* include = field(body, "include");
      include != nullptr && !(include->is_array() && include->empty())) {
    return unsupported_field("`include` is not supported by this server", "include");
  }
  if (const Json* reasoning = field(body, "reasoning");
      reasoning != nullptr && reasoning->is_object() && field(*reasoning, "effort") != nullptr) {
    return unsupported_field("`reasoning.effort` is not supported by this server",
                             "reasoning.effort");
  }
  if (const Json* truncation = field(body, "truncation");
      truncation != nullptr && *truncation != "disabled") {
    return unsupported_field("only `truncation: \"disabled\"` is supported", "truncation");
  }
  for (std::string_view name : {"conversation", "prompt"}) {
    if (field(body, name) != nullptr) {
      return unsupported_field(fmt::format("`{}` is not supported by this server", name),
                               std::string(name));
    }
  }
  return std::nullopt;
}

MaybeError parse_response_generation(const Json& body, ResponsesRequest* out) {
  std::optional<int64_t> max_tokens;
  KEEL_API_TRY(
      read_int(body, "max_output_tokens", 1, std::numeric_limits<int32_t>::max(), &max_tokens));
  if (max_tokens) {
    out->max_output_tokens = *max_tokens;
    out->chat_fields["max_completion_tokens"] = *max_tokens;
  }
  KEEL_API_TRY(read_number(body, "temperature", 0.0, 2.0, false, &out->temperature));
  if (out->temperature) out->chat_fields["temperature"] = *out->temperature;
  KEEL_API_TRY(read_number(body, "top_p", 0.0, 1.0, true, &out->top_p));
  if (out->top_p) out->chat_fields["top_p"] = *out->top_p;
  KEEL_API_TRY(read_bool(body, "parallel_tool_calls", &out->parallel_tool_calls));
  out->chat_fields["parallel_tool_calls"] = out->parallel_tool_calls;
  std::string cache_key;
  if (const Json* key = field(body, "prompt_cache_key"); key != nullptr && !key->is_null()) {
    KEEL_API_TRY(parse_prompt_cache_key(body, &cache_key));
    out->prompt_cache_key = cache_key;
    out->chat_fields["prompt_cache_key"] = cache_key;
  }
  for (std::string_view extra : {"seed", "top_k"}) {  // keel/vLLM extensions, checked by chat
    if (const Json* v = field(body, extra)) out->chat_fields[std::string(extra)] = *v;
  }
  return std::nullopt;
}

MaybeError parse_response_flags(const Json& body, ResponsesRequest* out) {
  std::optional<std::string> s;
  KEEL_API_TRY(read_string(body, "model", &s));
  if (s) out->model = std::move(*s);
  if (!out->model.empty()) out->chat_fields["model"] = out->model;
  KEEL_API_TRY(read_string(body, "instructions", &out->instructions));
  s.reset();
  KEEL_API_TRY(read_string(body, "previous_response_id", &s));
  if (s) {
    if (s->empty() || s->size() > kMaxResponseIdBytes) {
      return ApiError::bad_request("`previous_response_id` must be a string of 1 to 128 bytes",
                                   "previous_response_id");
    }
    out->previous_response_id = std::move(*s);
  }
  KEEL_API_TRY(read_bool(body, "store", &out->store));
  KEEL_API_TRY(read_bool(body, "stream", &out->stream));
  KEEL_API_TRY(read_bool(body, "background", &out->background));
  if (out->background && !out->store) {
    return ApiError::bad_request("`background` requires `store` to be true", "background");
  }
  if (out->background && out->stream) {
    return unsupported_field("`background` together with `stream` is not supported by this server",
                             "stream");
  }
  return std::nullopt;
}

}  // namespace

bool is_builtin_tool_type(std::string_view type) {
  for (std::string_view t : kBuiltinTools) {
    if (t == type) return true;
  }
  return type.starts_with("web_search") || type.starts_with("computer_use");
}

ApiResult<ResponsesRequest> parse_responses_request(
    const Json& body, const OrderedJson& ordered,
    const std::function<std::string(std::string_view)>& new_id) {
  if (!body.is_object() || !ordered.is_object()) return type_error("body", "a JSON object", body);
  ResponsesRequest out;
  KEEL_API_TRY(refuse_unsupported_fields(body));
  KEEL_API_TRY(parse_response_flags(body, &out));
  KEEL_API_TRY(parse_response_tools(ordered, &out));
  KEEL_API_TRY(parse_response_tool_choice(ordered, &out));
  KEEL_API_TRY(parse_text_format(ordered, &out));
  KEEL_API_TRY(parse_response_metadata(body, &out));
  KEEL_API_TRY(parse_response_generation(body, &out));
  const OrderedJson* input = ordered_field(ordered, "input");
  if (input == nullptr) return ApiError::bad_request("`input` is required", "input");
  ApiResult<OrderedJson> items = normalize_input_items(*input, new_id);
  if (!items.ok()) return items.error();
  out.input_items = std::move(items.value());
  return out;
}

}  // namespace keel::server
