// JSON Schema → GBNF text (gbnf_parser.h), for OpenAI's response_format json_schema (always
// compiled strictly: the grammar produces only documents that validate) and json_object.
//
// Supported subset: type (one or a list), properties / required (properties in key order —
// nlohmann::json keeps object keys sorted; optional ones may be left out; no undeclared property is
// ever produced, so any additionalProperties is honoured), enum, const, items / minItems /
// maxItems, string minLength / maxLength / pattern (regex.h, matched against the whole string),
// anyOf, $ref to
// "#/$defs/..." or "#/definitions/..." (recursion allowed), and the empty schema (any value).
// Annotations are ignored: title, description, default, examples, $schema, $id, $comment.
// Any other keyword (format, minimum, oneOf, ...) is refused: InvalidArgument naming it, which
// the server turns into HTTP 400.
// The output is compact JSON: at most one optional space between tokens, strings without \u
// escapes or control characters, numbers of at most 16 integer and 15 fraction digits.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::grammar {

// The GBNF grammar (root rule `root`) of documents valid under `schema`.
Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema);

// For grammars that embed several schemas (tool calling): the rule `rule_name` matching documents
// valid under `schema`, and the rules it needs, all named `rule_name-...`; the primitives they use
// (ws, json-string, json-value, ...) are not included: add json_primitives_gbnf() once.
// rule_name: letters, digits and '-'.
Result<std::string> json_schema_rules(const nlohmann::json& schema, std::string_view rule_name);
std::string_view json_primitives_gbnf();

// The GBNF grammar of any JSON object (response_format json_object).
std::string json_object_gbnf();

// `text` as a GBNF string literal ("..." with \\, \" and control bytes escaped).
std::string gbnf_literal(std::string_view text);

}  // namespace keel::grammar
