// The GBNF grammar that forces a tool call (tool_choice "required" or a named function) in the
// model family's wire syntax (tool_format.h), with each call's arguments constrained by its
// tool's `parameters` schema (grammar/json_schema.h). The output it allows always parses with
// ToolCallParser into at least one call (exactly one when parallel_tool_calls is false or the
// family allows only one):
//   generic  {"name": "N", "arguments": A}  |  [call, call, ...]          (parallel)
//   hermes   <tool_call>\n{"name": "N", "arguments": A}\n</tool_call>  ("\n"-separated, parallel)
//   llama3   {"name": "N", "parameters": A}                             (always one)
//   mistral  [{"name": "N", "arguments": A}, ...]                       (one unless parallel)
// Thread safety: a pure function.
#pragma once

#include <string>

#include "core/result.h"
#include "server/tool_format.h"
#include "server/tool_request.h"

namespace keel::server {

// Requires request.forced(). Errors: InvalidArgument from the schema compiler.
Result<std::string> forced_tool_grammar(ToolFamily family, const ToolRequest& request);

}  // namespace keel::server
