// The GBNF grammar that forces a tool call (tool_choice "required" or a named function) in the
// model family's wire syntax (tool_format.h), with each call's arguments constrained by its
// tool's `parameters` schema (grammar/json_schema.h). The output it allows always parses with
// ToolCallParser into at least one call (exactly one when parallel_tool_calls is false or the
// family allows only one):
//   generic  {"name": "N", "arguments": A}  |  [call, call, ...]          (parallel)
//   hermes   <tool_call>\n{"name": "N", "arguments": A}\n</tool_call>  ("\n"-separated, parallel)
//   llama3   {"name": "N", "parameters": A}                             (always one)
//   mistral  [{"name": "N", "arguments": A}, ...]                       (one unless parallel)
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "server/tool_format.h"
#include "server/tool_request.h"

namespace keel::server {

// Requires request.forced(). Errors: InvalidArgument from the schema compiler.
Result<std::string> forced_tool_grammar(ToolFamily family, const ToolRequest& request);

// tool_choice "auto": free text or well-formed calls, so whatever the model writes parses (a
// lazily triggered grammar, written as one context-free grammar):
//   hermes        text without "<tool_call>", then any number of blocks (one unless parallel),
//                 each followed by such text — free until the trigger, then the call's grammar
//   JSON families the forced form, or text whose first non-space character is not `{` or `[`
//                 (the parser's trigger: such an output is a call)
// Errors: as forced_tool_grammar.
Result<std::string> auto_tool_grammar(ToolFamily family, const ToolRequest& request);

// A tool grammar (forced or auto; its first line is its `root` rule) that lets a reasoning model
// think first (reasoning_split.h): in_reasoning (the prompt opened <think>): any text without
// "</think>", then "</think>" and spaces, then the tool grammar; otherwise an optional
// "<think>" … "</think>" block and spaces before it.
[[nodiscard]] std::string with_reasoning_prefix(std::string_view tool_grammar, bool in_reasoning);

// Rules `<name>-0` … `<name>-(n-1)` (n = |marker|) for any text that does not contain `marker`,
// `<name>-0` the start (a KMP automaton: rule k = the text so far ends with k bytes of marker).
[[nodiscard]] std::string text_without_rules(std::string_view marker, const std::string& name);

}  // namespace keel::server
