// A JSON Schema checker for what keel's grammar compiler supports (grammar/json_schema.h),
// written independently of the compiler so that tests can check generated documents against the
// schema itself: type, enum, const, allOf, anyOf, oneOf, not, $ref (local JSON pointers),
// minimum / maximum / exclusive bounds (compared as doubles, as validators do), multipleOf (exact
// decimal arithmetic on the shortest text of the doubles), minLength / maxLength (code points),
// pattern (std::regex search, ECMAScript), format (format_check.h), properties, required,
// additionalProperties, patternProperties, propertyNames, minProperties, maxProperties, items
// (schema or draft-7 array), prefixItems, additionalItems, minItems, maxItems, uniqueItems.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace keel::grammar::testing {

// "" when `doc` validates against `schema` (whose root is `root` for $ref), else why not.
std::string schema_violation(const nlohmann::ordered_json& doc,
                             const nlohmann::ordered_json& schema,
                             const nlohmann::ordered_json& root);

}  // namespace keel::grammar::testing
