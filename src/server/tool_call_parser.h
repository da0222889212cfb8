// The model's output → tool calls + remaining content, per family (tool_format.h), for complete
// outputs (streams: tool_call_stream.h).
//   - hermes: every <tool_call>...</tool_call> block whose body is a JSON object with a string
//     "name" is a call; the text around the blocks is content. A block that does not parse stays
//     in the content as written.
//   - llama3 / mistral / generic: the whole output (trimmed; a leading <|python_tag|> or
//     [TOOL_CALLS] text dropped) is a JSON object {"name", "arguments" | "parameters"} or an array
//     of them, each naming a function of the request; otherwise it is all content. Streams hold
//     the output back only when its first non-space character is `{` or `[`.
// A call's arguments are the object as the model wrote it with the whitespace outside strings
// dropped (ToolCallScanner: key order, numbers and escapes kept; a JSON string holding an object
// is unwrapped; "{}" when absent). With parallel_tool_calls false only the first call is kept.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_scanner.h"
#include "server/tool_format.h"
#include "server/tool_request.h"

namespace keel::server {

struct ToolCall {
  std::string id;         // "call_..." (assigned by the response, not the parser)
  std::string name;       // the function
  std::string arguments;  // JSON text of the arguments object
};

struct ParsedToolOutput {
  std::string content;  // the text that is not a call
  std::vector<ToolCall> calls;
};

[[nodiscard]] ParsedToolOutput parse_tool_output(ToolFamily family, std::string_view text,
                                                 const ToolRequest& request);

// The scanners of the call objects in `body`: one for an object, one per element for an array
// of objects (each scanned up to its end); empty when `body` starts with neither. Shared with
// ToolCallStream, so streamed and complete outputs give calls the same arguments text.
[[nodiscard]] std::vector<ToolCallScanner> scan_call_objects(std::string_view body);

}  // namespace keel::server
