// A JSON Schema checker for the subset keel's grammar compiler supports (grammar/json_schema.h),
// written independently of the compiler so that tests can check generated documents against the
// schema itself: type, properties, required, additionalProperties (false or a schema), enum,
// const, items, minItems, maxItems, minLength, maxLength (in code points), pattern (std::regex
// search, ECMAScript), anyOf, $ref to #/$defs or #/definitions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace keel::grammar::testing {

// "" when `doc` validates against `schema` (whose root is `root` for $ref), else why not.
std::string schema_violation(const nlohmann::json& doc, const nlohmann::json& schema,
                             const nlohmann::json& root);

}  // namespace keel::grammar::testing
