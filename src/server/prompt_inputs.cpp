// parse_messages and parse_prompt: the chat `messages` array and the completions `prompt` union
// (see generation_request.h). Shared by the generation routes and /tokenize.
#include <fmt/format.h>

#include <array>

#include "server/generation_request.h"
#include "server/json_fields.h"
#include "server/pic_segments.h"
#include "server/tool_request.h"

namespace keel::server {
namespace {

constexpr std::array<std::string_view, 5> kRoles = {"system", "developer", "user", "assistant",
                                                    "tool"};

ApiError reserved_marker(const std::string& param) {
  return ApiError::bad_request(fmt::format("`{}` contains keel's reserved PIC marker", param),
                               param);
}

// A part's `cache_control`: {"type": "position_independent"} marks it as a PIC chunk;
// {"type": "ephemeral"} (Anthropic's prompt caching) is accepted and changes nothing.
ApiResult<bool> position_independent(const Json& part, const std::string& part_param) {
  const Json* cc = field(part, "cache_control");
  if (cc == nullptr) return false;
  const std::string param = part_param + ".cache_control";
  if (!cc->is_object()) return type_error(param, "an object", *cc);
  const Json* type = field(*cc, "type");
  if (type != nullptr && type->is_string()) {
    if (type->get<std::string>() == "position_independent") return true;
    if (type->get<std::string>() == "ephemeral") return false;
  }
  return ApiError::bad_request(
      fmt::format("`{}.type` must be \"position_independent\" or \"ephemeral\"", param),
      param + ".type");
}

// `content`: a string, null (assistant/tool only) or an array of {"type":"text","text":...}.
ApiResult<std::string> parse_content(const Json& msg, const std::string& where,
                                     const std::string& role) {
  const Json* content = field(msg, "content");
  const std::string param = where + ".content";
  if (content == nullptr) {
    if (role == "assistant") return std::string();  // e.g. a message with tool_calls only
    return ApiError::bad_request(fmt::format("`{}` is required for role \"{}\"", param, role),
                                 param);
  }
  if (content->is_string()) {
    if (has_pic_marks(content->get_ref<const std::string&>())) return reserved_marker(param);
    return content->get<std::string>();
  }
  if (!content->is_array())
    return type_error(param, "a string or an array of content parts", *content);
  std::string text;
  for (size_t j = 0; j < content->size(); ++j) {
    const Json& part = (*content)[j];
    const std::string part_param = fmt::format("{}[{}]", param, j);
    if (!part.is_object()) return type_error(part_param, "an object", part);
    const Json* type = field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return ApiError::bad_request(fmt::format("`{}.type` must be a string", part_param),
                                   part_param + ".type");
    }
    if (type->get<std::string>() != "text") {
      return ApiError::bad_request(
          fmt::format("content part type \"{}\" is not supported (only \"text\")",
                      type->get<std::string>()),
          part_param + ".type", "unsupported_value");
    }
    const Json* t = field(part, "text");
    if (t == nullptr || !t->is_string()) {
      return ApiError::bad_request(fmt::format("`{}.text` must be a string", part_param),
                                   part_param + ".text");
    }
    if (has_pic_marks(t->get_ref<const std::string&>())) return reserved_marker(part_param);
    ApiResult<bool> pic = position_independent(part, part_param);
    if (!pic.ok()) return pic.error();
    if (j > 0) text += '\n';
    text += pic.value() ? mark_pic(t->get<std::string>()) : t->get<std::string>();
  }
  return text;
}

// An assistant message's thinking: `reasoning_content` (llama-server, the AI SDK) or `reasoning`
// (vLLM), a string or null; the first when both are given.
MaybeError parse_message_reasoning(const Json& msg, const std::string& where,
                                   std::optional<std::string>* out) {
  for (std::string_view name : {"reasoning_content", "reasoning"}) {
    const Json* r = field(msg, name);
    if (r == nullptr || r->is_null()) continue;
    if (!r->is_string()) return type_error(where + "." + std::string(name), "a string", *r);
    if (has_pic_marks(r->get_ref<const std::string&>())) {
      return reserved_marker(where + "." + std::string(name));
    }
    if (!out->has_value()) *out = r->get<std::string>();
  }
  return std::nullopt;
}

ApiResult<ChatMessage> parse_message(const Json& msg, size_t i) {
  const std::string where = fmt::format("messages[{}]", i);
  if (!msg.is_object()) return type_error(where, "an object", msg);
  ChatMessage out;
  const Json* role = field(msg, "role");
  if (role == nullptr || !role->is_string()) {
    return ApiError::bad_request(fmt::format("`{}.role` must be a string", where), where + ".role");
  }
  out.role = role->get<std::string>();
  bool known = false;
  for (std::string_view r : kRoles) known = known || r == out.role;
  if (!known) {
    return ApiError::bad_request(
        fmt::format("`{}.role` must be one of system, developer, user, assistant, tool; got \"{}\"",
                    where, out.role),
        where + ".role");
  }
  ApiResult<std::string> content = parse_content(msg, where, out.role);
  if (!content.ok()) return content.error();
  out.content = std::move(content.value());
  std::optional<std::string> name, tool_call_id;
  KEEL_API_TRY(read_string(msg, "name", &name));
  KEEL_API_TRY(read_string(msg, "tool_call_id", &tool_call_id));
  if (name) out.name = std::move(*name);
  if (tool_call_id) out.tool_call_id = std::move(*tool_call_id);
  if (out.role == "assistant") {
    ApiResult<nlohmann::ordered_json> calls = parse_message_tool_calls(msg, where);
    if (!calls.ok()) return calls.error();
    out.tool_calls = std::move(calls.value());
    KEEL_API_TRY(parse_message_reasoning(msg, where, &out.reasoning_content));
  }
  return out;
}

ApiResult<std::vector<int32_t>> parse_token_ids(const Json& arr, const std::string& param,
                                                int32_t vocab_size) {
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::optional<int64_t> id = as_integer(arr[i]);
    if (!arr[i].is_number() || !id || *id < 0 || *id >= vocab_size) {
      return ApiError::bad_request(fmt::format("`{}[{}]` must be a token id in [0, {}), got {}",
                                               param, i, vocab_size, describe_value(arr[i])),
                                   param);
    }
    ids.push_back(static_cast<int32_t>(*id));
  }
  if (ids.empty())
    return ApiError::bad_request(fmt::format("`{}` must not be empty", param), param);
  return ids;
}

}  // namespace

ApiResult<std::vector<ChatMessage>> parse_messages(const Json& messages) {
  if (!messages.is_array()) return type_error("messages", "an array", messages);
  if (messages.empty()) return ApiError::bad_request("`messages` must not be empty", "messages");
  std::vector<ChatMessage> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    ApiResult<ChatMessage> m = parse_message(messages[i], i);
    if (!m.ok()) return m.error();
    out.push_back(std::move(m.value()));
  }
  return out;
}

ApiResult<std::vector<PromptInput>> parse_prompt(const Json& prompt, int32_t vocab_size) {
  std::vector<PromptInput> out;
  if (prompt.is_string()) {
    out.push_back(PromptInput{.is_tokens = false, .text = prompt.get<std::string>(), .tokens = {}});
    return out;
  }
  if (!prompt.is_array()) {
    return type_error("prompt", "a string, an array of strings or an array of token ids", prompt);
  }
  if (prompt.empty()) return ApiError::bad_request("`prompt` must not be empty", "prompt");
  const Json& first = prompt[0];
  if (first.is_number()) {  // one prompt of token ids
    ApiResult<std::vector<int32_t>> ids = parse_token_ids(prompt, "prompt", vocab_size);
    if (!ids.ok()) return ids.error();
    out.push_back(PromptInput{.is_tokens = true, .text = {}, .tokens = std::move(ids.value())});
    return out;
  }
  for (size_t i = 0; i < prompt.size(); ++i) {
    const Json& p = prompt[i];
    const std::string param = fmt::format("prompt[{}]", i);
    if (first.is_string() && p.is_string()) {
      out.push_back(PromptInput{.is_tokens = false, .text = p.get<std::string>(), .tokens = {}});
    } else if (first.is_array() && p.is_array()) {
      ApiResult<std::vector<int32_t>> ids = parse_token_ids(p, param, vocab_size);
      if (!ids.ok()) return ids.error();
      out.push_back(PromptInput{.is_tokens = true, .text = {}, .tokens = std::move(ids.value())});
    } else {
      return ApiError::bad_request(
          fmt::format("`prompt` must be a string, an array of strings, an array of token ids or an "
                      "array of token-id arrays; element {} is {}",
                      i, json_type_name(p)),
          "prompt");
    }
  }
  return out;
}

}  // namespace keel::server
