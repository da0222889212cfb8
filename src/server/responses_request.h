// ResponsesRequest: a validated POST /v1/responses body (OpenAI's Responses API), before the
// conversation is assembled. parse_responses_request checks each field's type and range (400 with
// `param`), ignores unknown fields (as the chat route does) and translates the generation fields
// into the chat-completions body they mean, so the chat path validates and runs them (tools, tool
// grammar, structured outputs, sampling): chat_fields holds that body without `messages`.
//   - `input`: a string (one user message) or an array of items (responses_items.h); required.
//   - `instructions`: a string, a system message placed first (never carried over a chain).
//   - `tools`: function tools {type: "function", name, description?, parameters?, strict?} →
//     chat tools; a built-in tool (web_search, web_search_preview, file_search, code_interpreter,
//     computer_use_preview, image_generation, mcp, local_shell, ...) is a 400 naming its type
//     (code unsupported_tool).
//   - `tool_choice`: "none" | "auto" | "required" | {type: "function", name}; others are a 400.
//   - `text.format`: {type: "text"} | {type: "json_object"} | {type: "json_schema", name, schema,
//     description?, strict?} → response_format.
//   - `max_output_tokens` (≥ 1) → max_completion_tokens; `temperature`, `top_p`,
//     `parallel_tool_calls`, `model` as in chat; keel's `seed` and `top_k` pass through.
//   - `metadata`: at most 16 string values (keys ≤ 64, values ≤ 512 bytes), as OpenAI.
//   - `store` (default true), `background` (needs store: a 400 otherwise; not with `stream`),
//     `stream`, `previous_response_id` (1-128 bytes).
//   - Not supported (a 400 naming the field when set): `include` entries, `reasoning.effort`
//     other than null, `truncation: "auto"`, `conversation`, `prompt`.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace keel::server {

using OrderedJson = nlohmann::ordered_json;

struct ResponsesRequest {
  std::string model;                        // as sent; "" when absent
  OrderedJson input_items;                  // this turn's items, normalized (responses_items.h)
  std::optional<std::string> instructions;  // nullopt: none
  std::string previous_response_id;         // "" when absent
  bool store = true;
  bool stream = false;
  bool background = false;
  OrderedJson metadata = OrderedJson::object();
  // As the Response object echoes them (Responses shapes, key order as sent).
  OrderedJson tools = OrderedJson::array();
  OrderedJson tool_choice = "auto";
  OrderedJson text = {{"format", {{"type", "text"}}}};
  std::optional<int64_t> max_output_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  bool parallel_tool_calls = true;
  std::optional<std::string> prompt_cache_key;  // echoed; a no-op on one process (agent-kv.md)
  // The chat-completions body these fields mean, without `messages` (and without `stream`).
  OrderedJson chat_fields = OrderedJson::object();
};

// `body` is the request as parsed (sorted keys, for the field readers); `ordered` the same text
// parsed keeping key order (tools' and text.format's schemas are generated in that order).
// `new_id(prefix)` names the input items that come without an id ("msg_" → "msg_<hex>").
ApiResult<ResponsesRequest> parse_responses_request(
    const Json& body, const OrderedJson& ordered,
    const std::function<std::string(std::string_view prefix)>& new_id);

// The built-in (OpenAI-hosted) tool types this server refuses, for messages and tests.
[[nodiscard]] bool is_builtin_tool_type(std::string_view type);

}  // namespace keel::server
