// The model's output → tool calls + remaining content, per family (tool_format.h), for complete
// outputs (parse_tool_output) and for streams (ToolCallStream: content streams live until a call
// may be starting, then the rest is held and parsed at the end).
//   - hermes: every <tool_call>...</tool_call> block whose body is a JSON object with a string
//     "name" is a call; the text around the blocks is content. A block that does not parse stays
//     in the content as written.
//   - llama3 / mistral / generic: the whole output (trimmed; a leading <|python_tag|> or
//     [TOOL_CALLS] text dropped) is a JSON object {"name", "arguments" | "parameters"} or an array
//     of them, each naming a function of the request; otherwise it is all content. Streams hold
//     the output back only when its first non-space character is `{` or `[`.
// A call's arguments are compact JSON text (an object; "{}" when absent). With
// parallel_tool_calls false only the first call is kept.
// Thread safety: pure functions; a ToolCallStream has one owner.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

class ToolCallStream {
 public:
  // `request` must outlive the stream.
  ToolCallStream(ToolFamily family, const ToolRequest* request)
      : family_(family), request_(request) {}

  // More output; returns the content that can be sent now.
  std::string push(std::string_view text);
  // At the end of the output: the content not yet sent and the calls.
  ParsedToolOutput finish();

 private:
  ToolFamily family_;
  const ToolRequest* request_;
  std::string held_;        // output not yet released
  bool capturing_ = false;  // a call may have started: hold everything to the end
  bool plain_ = false;      // JSON families: the output is not a call; release at once
};

}  // namespace keel::server
