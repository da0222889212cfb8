// ToolFormat: how a model writes tool calls, decided once per server from its chat template's
// text (detect_tool_format), and the call ids it uses. Families:
//   - kHermes (Qwen2.5, Qwen3, ...): `<tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>`
//     blocks, one per call, anywhere after some content.
//   - kLlama3 (Llama 3.1 / 3.2 JSON tools): the whole output `{"name": N, "parameters": {...}}`
//     (after an optional <|python_tag|>); one call per turn (the template refuses more).
//   - kMistral (Mistral Nemo, ...): `[TOOL_CALLS][{"name": N, "arguments": {...}}, ...]`; the
//     [TOOL_CALLS] token is a control token, not in the decoded text, so the output is parsed as
//     a JSON array. Call ids are 9 letters and digits, which the template requires.
//   - kGeneric (any other template, e.g. stories260K's ChatML): keel's own convention, the whole
//     output `{"name": N, "arguments": {...}}` or a JSON array of those; when the template does
//     not render `tools` itself, the server describes them in the system prompt (tool_prompt.h).
// Thread safety: immutable values and pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace keel::server {

enum class ToolFamily { kGeneric, kHermes, kLlama3, kMistral };

struct ToolFormat {
  ToolFamily family = ToolFamily::kGeneric;
  // The chat template reads `tools` (and assistant tool_calls); else keel puts the tools and past
  // calls into the messages as text (tool_prompt.h).
  bool template_renders_tools = false;
};

// From the chat template's source: <tool_call> → Hermes; [TOOL_CALLS] → Mistral; <|python_tag|>
// or a "parameters" call format with Llama 3 headers → Llama 3; else generic. A template that
// mentions `tools` renders them itself.
[[nodiscard]] ToolFormat detect_tool_format(std::string_view template_source);

[[nodiscard]] std::string_view tool_family_name(ToolFamily family);

// A call id unique within the server's responses: "call_" + 24 letters and digits (Mistral: 9
// letters and digits), derived from the request id, the choice and the call's index.
[[nodiscard]] std::string make_tool_call_id(ToolFamily family, std::string_view request_id,
                                            int32_t choice, size_t call_idx);

}  // namespace keel::server
