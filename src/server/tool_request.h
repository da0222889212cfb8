// ToolRequest: the tool-calling fields of a chat request, validated — `tools` (at most 128
// functions, each {"type": "function", "function": {name, description?, parameters?, strict?}}),
// `tool_choice` ("none" | "auto" | "required" | {"type": "function", "function": {"name"}}) and
// `parallel_tool_calls` (default true) — and the `tool_calls` of assistant messages.
// Decisions:
//   - a name is 1-64 of [A-Za-z0-9_-]; names are unique; `parameters` is a JSON Schema of an
//     object, compiled by grammar/json_schema.h: an unsupported keyword is a 400 naming it
//     (param tools[i].function.parameters, code unsupported_value). No `parameters`: {} arguments.
//   - tool_choice defaults to "auto" with tools and "none" without; "required" or a named
//     function without tools, or a name not in `tools`, is a 400 (param tool_choice).
//   - `tools: []` means no tools. tool_choice "none" keeps the tools out of the prompt.
//   - an assistant message's tool_calls: [{id, type: "function", function: {name, arguments}}],
//     `arguments` a string holding JSON (kept as a string when it does not parse).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/json_fields.h"

namespace keel::server {

enum class ToolChoice { kNone, kAuto, kRequired, kNamed };

struct ToolDef {
  std::string name;
  std::string description;  // "" when absent
  // JSON Schema of the arguments object ({"type": "object"} if absent), keys in the order sent
  // (server/schema_order.h).
  nlohmann::ordered_json parameters;
  nlohmann::ordered_json definition;  // the tool as sent, {"type": "function", "function": {...}}
};

struct ToolRequest {
  std::vector<ToolDef> tools;
  ToolChoice choice = ToolChoice::kNone;
  std::string forced_name;  // kNamed: the function to call
  bool parallel = true;     // parallel_tool_calls: false → at most one call
  // A tool grammar constrains the output (forced, or "auto" without response_format/grammar/
  // regex: tool_grammar.h), so wherever a call starts it is well formed: streams send it as it
  // is generated. Set by the server after parsing.
  bool constrained = false;

  // The model may call tools (tool_choice is not "none").
  [[nodiscard]] bool active() const { return choice != ToolChoice::kNone; }
  // The model must call a tool ("required" or a named function): the output is forced.
  [[nodiscard]] bool forced() const {
    return choice == ToolChoice::kRequired || choice == ToolChoice::kNamed;
  }
  [[nodiscard]] const ToolDef* find(std::string_view name) const;
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat body.
MaybeError parse_tool_request(const Json& body, ToolRequest* out);

// An assistant message's `tool_calls` (where = "messages[i]"): null when absent, else an array
// of {"id", "type": "function", "function": {"name", "arguments"}} with `arguments` parsed to
// JSON (templates read it as a mapping).
ApiResult<nlohmann::ordered_json> parse_message_tool_calls(const Json& msg,
                                                           const std::string& where);

}  // namespace keel::server
