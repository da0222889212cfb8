// Responses API items ↔ chat messages (see responses_items.h).
#include "server/responses_items.h"

#include <fmt/format.h>

#include <array>

namespace keel::server {
namespace {

constexpr std::array<std::string_view, 4> kItemMessageRoles = {"user", "system", "developer",
                                                               "assistant"};

ApiError input_item_error(size_t i, std::string_view field, std::string message) {
  return ApiError::bad_request(std::move(message), fmt::format("input[{}]{}", i, field));
}

bool has_string_field(const OrderedJson& obj, std::string_view name) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_string();
}

std::string string_field_or_empty(const OrderedJson& obj, std::string_view name) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The text of `content` (a string or text parts) for a message of `role`, as parts of the type
// the role's items carry.
ApiResult<OrderedJson> message_content_parts(const OrderedJson& content, size_t i,
                                             const std::string& role) {
  const std::string part_type = role == "assistant" ? "output_text" : "input_text";
  OrderedJson parts = OrderedJson::array();
  if (content.is_string()) {
    parts.push_back({{"type", part_type}, {"text", content.get<std::string>()}});
    return parts;
  }
  if (!content.is_array()) {
    return input_item_error(i, ".content",
                            fmt::format("`input[{}].content` must be a string or an "
                                        "array of content parts",
                                        i));
  }
  for (size_t j = 0; j < content.size(); ++j) {
    const OrderedJson& part = content[j];
    const std::string where = fmt::format(".content[{}]", j);
    if (!part.is_object() || !has_string_field(part, "type")) {
      return input_item_error(
          i, where, fmt::format("`input[{}]{}` must be an object with a `type`", i, where));
    }
    const std::string type = part["type"].get<std::string>();
    if (type != "input_text" && type != "output_text" && type != "text") {
      ApiError e = input_item_error(i, where + ".type",
                                    fmt::format("content part type \"{}\" is not supported (only "
                                                "input_text and output_text)",
                                                type));
      e.code = "unsupported_value";
      return e;
    }
    if (!has_string_field(part, "text")) {
      return input_item_error(i, where + ".text",
                              fmt::format("`input[{}]{}.text` must be a string", i, where));
    }
    parts.push_back({{"type", part_type}, {"text", part["text"]}});
  }
  return parts;
}

ApiResult<OrderedJson> normalize_message(const OrderedJson& item, size_t i,
                                         const std::function<std::string(std::string_view)>& id) {
  if (!has_string_field(item, "role")) {
    return input_item_error(i, ".role", fmt::format("`input[{}].role` must be a string", i));
  }
  const std::string role = item["role"].get<std::string>();
  bool known = false;
  for (std::string_view r : kItemMessageRoles) known = known || r == role;
  if (!known) {
    return input_item_error(i, ".role",
                            fmt::format("`input[{}].role` must be one of user, system, developer, "
                                        "assistant; got \"{}\"",
                                        i, role));
  }
  auto content = item.find("content");
  if (content == item.end() || content->is_null()) {
    return input_item_error(i, ".content", fmt::format("`input[{}].content` is required", i));
  }
  ApiResult<OrderedJson> parts = message_content_parts(*content, i, role);
  if (!parts.ok()) return parts.error();
  const std::string given = string_field_or_empty(item, "id");
  return OrderedJson{{"id", given.empty() ? id("msg_") : given},
                     {"type", "message"},
                     {"role", role},
                     {"status", "completed"},
                     {"content", std::move(parts.value())}};
}

ApiResult<OrderedJson> normalize_call(const OrderedJson& item, size_t i,
                                      const std::function<std::string(std::string_view)>& id) {
  for (std::string_view f : {"call_id", "name", "arguments"}) {
    if (!has_string_field(item, f)) {
      return input_item_error(i, fmt::format(".{}", f),
                              fmt::format("`input[{}].{}` must be a string", i, f));
    }
  }
  const std::string given = string_field_or_empty(item, "id");
  return OrderedJson{{"id", given.empty() ? id("fc_") : given},
                     {"type", "function_call"},
                     {"status", "completed"},
                     {"call_id", item["call_id"]},
                     {"name", item["name"]},
                     {"arguments", item["arguments"]}};
}

ApiResult<OrderedJson> normalize_call_output(
    const OrderedJson& item, size_t i, const std::function<std::string(std::string_view)>& id) {
  if (!has_string_field(item, "call_id")) {
    return input_item_error(i, ".call_id", fmt::format("`input[{}].call_id` must be a string", i));
  }
  auto output = item.find("output");
  if (output == item.end() || !(output->is_string() || output->is_array())) {
    return input_item_error(i, ".output",
                            fmt::format("`input[{}].output` must be a string or text parts", i));
  }
  std::string text;
  if (output->is_string()) {
    text = output->get<std::string>();
  } else {
    ApiResult<OrderedJson> parts = message_content_parts(*output, i, "user");
    if (!parts.ok()) return parts.error();
    for (size_t j = 0; j < parts.value().size(); ++j) {
      if (j > 0) text += '\n';
      text += parts.value()[j]["text"].get<std::string>();
    }
  }
  const std::string given = string_field_or_empty(item, "id");
  return OrderedJson{{"id", given.empty() ? id("fco_") : given},
                     {"type", "function_call_output"},
                     {"status", "completed"},
                     {"call_id", item["call_id"]},
                     {"output", std::move(text)}};
}

ApiResult<OrderedJson> normalize_reasoning(const OrderedJson& item,
                                           const std::function<std::string(std::string_view)>& id) {
  std::string text;
  for (std::string_view key : {"content", "summary"}) {
    auto parts = item.find(key);
    if (parts == item.end() || !parts->is_array()) continue;
    for (const OrderedJson& p : *parts) {
      if (p.is_object() && has_string_field(p, "text")) text += p["text"].get<std::string>();
    }
    if (!text.empty()) break;
  }
  const std::string given = string_field_or_empty(item, "id");
  return reasoning_item(given.empty() ? id("rs_") : given, std::move(text));
}

ApiResult<OrderedJson> normalize_item(const OrderedJson& item, size_t i,
                                      const std::function<std::string(std::string_view)>& id) {
  if (!item.is_object()) {
    return input_item_error(i, "", fmt::format("`input[{}]` must be an object", i));
  }
  auto type = item.find("type");
  if (type == item.end() || type->is_null()) return normalize_message(item, i, id);
  if (!type->is_string()) {
    return input_item_error(i, ".type", fmt::format("`input[{}].type` must be a string", i));
  }
  const std::string t = type->get<std::string>();
  if (t == "message") return normalize_message(item, i, id);
  if (t == "function_call") return normalize_call(item, i, id);
  if (t == "function_call_output") return normalize_call_output(item, i, id);
  if (t == "reasoning") return normalize_reasoning(item, id);
  ApiError e =
      input_item_error(i, ".type",
                       fmt::format("input item type \"{}\" is not supported (only message, "
                                   "function_call, function_call_output and reasoning)",
                                   t));
  e.code = "unsupported_value";
  return e;
}

std::string joined_part_text(const OrderedJson& parts) {
  std::string text;
  for (size_t j = 0; j < parts.size(); ++j) {
    if (j > 0) text += '\n';
    text += parts[j]["text"].get<std::string>();
  }
  return text;
}

}  // namespace

ApiResult<OrderedJson> normalize_input_items(
    const OrderedJson& input, const std::function<std::string(std::string_view)>& new_id) {
  OrderedJson items = OrderedJson::array();
  if (input.is_string()) {
    items.push_back({{"id", new_id("msg_")},
                     {"type", "message"},
                     {"role", "user"},
                     {"status", "completed"},
                     {"content", {{{"type", "input_text"}, {"text", input.get<std::string>()}}}}});
    return items;
  }
  if (!input.is_array()) {
    return ApiError::bad_request("`input` must be a string or an array of input items", "input");
  }
  if (input.empty()) return ApiError::bad_request("`input` must not be empty", "input");
  for (size_t i = 0; i < input.size(); ++i) {
    ApiResult<OrderedJson> item = normalize_item(input[i], i, new_id);
    if (!item.ok()) return item.error();
    items.push_back(std::move(item.value()));
  }
  return items;
}

ApiResult<OrderedJson> chat_messages(const std::optional<std::string>& instructions,
                                     const OrderedJson& items) {
  OrderedJson messages = OrderedJson::array();
  if (instructions) messages.push_back({{"role", "system"}, {"content", *instructions}});
  std::optional<std::string> pending_reasoning;  // a reasoning item's text, for the next turn
  // Whether the last message is an assistant message that later function calls may join.
  bool assistant_open = false;
  for (const OrderedJson& item : items) {
    const std::string type = item["type"].get<std::string>();
    if (type == "reasoning") {
      std::string text = joined_part_text(item["content"]);
      if (!text.empty()) pending_reasoning = std::move(text);
      continue;
    }
    if (type == "function_call") {
      if (!assistant_open) {
        messages.push_back({{"role", "assistant"}, {"content", ""}});
        assistant_open = true;
      }
      OrderedJson& m = messages.back();
      if (!m.contains("tool_calls")) m["tool_calls"] = OrderedJson::array();
      m["tool_calls"].push_back(
          {{"id", item["call_id"]},
           {"type", "function"},
           {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}});
    } else if (type == "function_call_output") {
      messages.push_back(
          {{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", item["output"]}});
      assistant_open = false;
    } else {  // message
      const std::string role = item["role"].get<std::string>();
      messages.push_back({{"role", role}, {"content", joined_part_text(item["content"])}});
      assistant_open = role == "assistant";
    }
    if (assistant_open && pending_reasoning && !messages.back().contains("reasoning_content")) {
      messages.back()["reasoning_content"] = std::move(*pending_reasoning);
      pending_reasoning.reset();
    }
  }
  if (messages.empty()) {
    return ApiError::bad_request("the conversation holds no message to answer", "input");
  }
  return messages;
}

OrderedJson message_output_item(std::string id, std::string text) {
  return {{"id", std::move(id)},
          {"type", "message"},
          {"status", "completed"},
          {"role", "assistant"},
          {"content",
           {{{"type", "output_text"},
             {"text", std::move(text)},
             {"annotations", OrderedJson::array()},
             {"logprobs", OrderedJson::array()}}}}};
}

OrderedJson function_call_item(std::string id, std::string call_id, std::string name,
                               std::string arguments) {
  return {{"id", std::move(id)},     {"type", "function_call"},
          {"status", "completed"},   {"call_id", std::move(call_id)},
          {"name", std::move(name)}, {"arguments", std::move(arguments)}};
}

OrderedJson reasoning_item(std::string id, std::string text) {
  OrderedJson content = OrderedJson::array();
  if (!text.empty()) content.push_back({{"type", "reasoning_text"}, {"text", std::move(text)}});
  return {{"id", std::move(id)},
          {"type", "reasoning"},
          {"summary", OrderedJson::array()},
          {"content", std::move(content)}};
}

std::string dump_ordered_json(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

std::string output_text(const OrderedJson& output) {
  std::string text;
  for (const OrderedJson& item : output) {
    if (item.value("type", "") != "message") continue;
    for (const OrderedJson& part : item["content"]) {
      if (part.value("type", "") == "output_text") text += part["text"].get<std::string>();
    }
  }
  return text;
}

}  // namespace keel::server
