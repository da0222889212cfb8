// What the chat template sees of a tool-calling conversation. With a tool-aware template
// (ToolFormat::template_renders_tools) the request's tools go to the template's `tools` variable
// and assistant tool_calls stay message fields (arguments as mappings). Otherwise keel's own
// convention, as text the template renders like any message:
//   - the tools are described in the system prompt (prepended to the first system message, or a
//     new one): each function's JSON definition, then "To call a function, reply with only a
//     JSON object {"name": <function name>, "arguments": <arguments object>}" (with parallel
//     calls: "or a JSON array of such objects");
//   - an assistant message's tool_calls become its content in that same JSON form;
//   - `tool` messages keep their role (the template renders them as it renders any role).
// Thread safety: a pure function.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "server/chat_formatter.h"
#include "server/tool_format.h"
#include "server/tool_request.h"

namespace keel::server {

struct ToolPrompt {
  std::vector<ChatMessage> messages;
  nlohmann::ordered_json tools;  // the template's `tools` (null: none)
};

[[nodiscard]] ToolPrompt tool_prompt(std::vector<ChatMessage> messages, const ToolRequest& request,
                                     const ToolFormat& format);

// keel's system-prompt text describing `request`'s tools (exposed for tests).
[[nodiscard]] std::string generic_tools_text(const ToolRequest& request);

}  // namespace keel::server
