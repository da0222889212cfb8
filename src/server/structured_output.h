// Structured outputs on the wire: reads response_format ({"type": "text" | "json_object" |
// "json_schema", "json_schema": {"name", "schema", "strict"}}) and keel's `grammar` (GBNF text)
// and `regex` extensions from a chat or completions body, and compiles the one given to the GBNF
// grammar the engine enforces (grammar/json_schema.h, grammar/regex.h). json_schema is always
// enforced strictly (strict: false is accepted and changes nothing).
// Errors are OpenAI-style 400s naming the field, and for schemas the unsupported keyword.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "server/api_error.h"
#include "server/json_fields.h"

namespace keel::server {

// *grammar = the GBNF grammar, or "" when the body asks for no structure.
MaybeError parse_structured_output(const nlohmann::json& body, std::string* grammar);

}  // namespace keel::server
