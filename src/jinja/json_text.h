// JSON in and out of template values. to_json matches Python's json.dumps as Hugging Face's
// `tojson` filter calls it (ensure_ascii=False, keys in insertion order unless sort_keys,
// separators ", " and ": ", or "," and ": " with an indent), so tool schemas render byte for byte
// as the reference implementation prints them. from_json converts request JSON (tools, tool
// calls, extra template variables) into values, keeping object key order for ordered_json.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "jinja/value.h"

namespace keel::jinja {

// Errors: InvalidArgument for values JSON cannot hold (undefined, namespace, function);
// ResourceExhausted once the text would pass `max_bytes`.
Result<std::string> to_json(const Value& v, std::optional<int> indent, bool sort_keys,
                            size_t max_bytes);

// Errors: InvalidArgument for binary values or nesting deeper than `max_depth`.
Result<Value> value_from_json(const nlohmann::ordered_json& j, int max_depth);
Result<Value> value_from_json(const nlohmann::json& j, int max_depth);

}  // namespace keel::jinja
