// JSON Schema → GBNF text (gbnf_parser.h), for OpenAI's response_format json_schema, tool
// parameters and strict function calls (always compiled strictly: the grammar produces only
// documents that validate) and json_object. Every keyword is enforced by the grammar while
// decoding; nothing is validated afterwards.
//
// Schemas are nlohmann::ordered_json: object properties are generated in the order the schema
// declares them. Supported (docs/structured-outputs.md has the full list and the limits):
//   type (one or a list), enum, const, anyOf, oneOf (as anyOf when its branches provably cannot
//   overlap — distinct types, disjoint const/enum values, or a required property whose values
//   are disjoint, as discriminated unions have — refused otherwise), allOf (merged into one
//   schema), $ref to any local JSON pointer ("#/$defs/x", "#/definitions/x", "#/properties/a",
//   "#"; recursion allowed), OpenAPI's nullable;
//   numbers: minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf (schema_numbers.h);
//   strings: minLength, maxLength, pattern (regex.h), format (schema_formats.h);
//   objects: properties, required, additionalProperties (false, true or a schema),
//   patternProperties, propertyNames, minProperties, maxProperties;
//   arrays: items, prefixItems (and draft-7 array `items` / additionalItems), minItems, maxItems.
// Absent additionalProperties generates no undeclared property (a valid subset).
// Annotations are ignored (title, description, default, examples, $schema, $id, $comment,
// readOnly, deprecated, discriminator, x-..., unknown keywords, unknown formats). A validation
// keyword keel cannot honour (not, if/then/else, contains, uniqueItems, dependentRequired, ...)
// is refused: InvalidArgument naming it, which the server turns into HTTP 400.
// The output is compact JSON: at most one optional space between tokens, strings without \u
// escapes or control characters, numbers of at most 16 integer and 15 fraction digits.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"

namespace keel::grammar {

// Schemas keep their keys in the order written.
using SchemaJson = nlohmann::ordered_json;

// The GBNF grammar (root rule `root`) of documents valid under `schema`.
Result<std::string> json_schema_to_gbnf(const SchemaJson& schema);

// For grammars that embed several schemas (tool calling): the rule `rule_name` matching documents
// valid under `schema`, and the rules it needs, all named `rule_name-...`; the primitives they use
// (ws, json-string, json-value, ...) are not included: add json_primitives_gbnf() once.
// rule_name: letters, digits and '-'.
Result<std::string> json_schema_rules(const SchemaJson& schema, std::string_view rule_name);
std::string_view json_primitives_gbnf();

// The GBNF grammar of any JSON object (response_format json_object).
std::string json_object_gbnf();

// `text` as a GBNF string literal ("..." with \\, \" and control bytes escaped).
std::string gbnf_literal(std::string_view text);

}  // namespace keel::grammar
