// The JSON Schemas of a generation request in the key order the client sent. Request bodies
// parse into nlohmann::json, whose objects keep their keys sorted; a schema's properties must be
// generated in the declared order (clients such as the openai SDK's parse helpers, zod and pydantic
// expect it). So, when a body has a json_schema response_format or tools, its text is parsed once
// more as nlohmann::ordered_json and those schemas — response_format.json_schema.schema and
// tools[i].function (parameters and the definition the chat template sees) — replace the sorted
// ones in the spec, the response_format grammar compiled again from the ordered schema.
// Called after parse_chat_request / parse_completion_request accepted the body (so the text is
// valid JSON within the size limits) and before the tool grammar is built.
// Thread safety: pure functions.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "server/generation_request.h"

namespace keel::server {

// The body's JSON text: the request body, or (batch lines) the text holding it under `body_key`.
struct BodyText {
  std::string_view json;
  std::string_view body_key;  // "" when `json` is the body itself
};

MaybeError apply_schema_order(const nlohmann::json& body, const BodyText& text,
                              GenerationSpec* spec);

}  // namespace keel::server
