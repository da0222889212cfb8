// Typed, range-checked reads of request fields: each reader leaves its output untouched when the
// field is absent or null (OpenAI treats null as "not given"), and returns an ApiError (400,
// invalid_request_error, `param` = the field) for a wrong type or an out-of-range value.
// Integers may be sent as integral floats (16.0), as pydantic accepts; booleans are never numbers.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace keel::server {

using Json = nlohmann::json;
using MaybeError = std::optional<ApiError>;

// Propagates a MaybeError from a field reader.
#define KEEL_API_TRY(expr)                                                               \
  do {                                                                                   \
    if (::keel::server::MaybeError keel_api_e_ = (expr)) return std::move(*keel_api_e_); \
  } while (0)

// The field's value, or nullptr when absent or null. `obj` must be an object.
const Json* field(const Json& obj, std::string_view name);

// "a string", "an integer", "an array", ... for messages.
std::string_view json_type_name(const Json& v);

// A short description of a value for error messages: scalars as JSON text (long strings cut),
// arrays and objects by type only (never serialized: they may be nested arbitrarily deep).
std::string describe_value(const Json& v);

// 400 "`name` must be <what>, got <type>" with param = name.
ApiError type_error(std::string_view name, std::string_view what, const Json& got);

MaybeError read_bool(const Json& obj, std::string_view name, bool* out);
MaybeError read_string(const Json& obj, std::string_view name, std::optional<std::string>* out);
// Integer in [lo, hi].
MaybeError read_int(const Json& obj, std::string_view name, int64_t lo, int64_t hi,
                    std::optional<int64_t>* out);
// Finite number in [lo, hi] (or (lo, hi] when lo_open).
MaybeError read_number(const Json& obj, std::string_view name, double lo, double hi, bool lo_open,
                       std::optional<double>* out);
// A JSON value as an integer when it is one (integral floats included); nullopt otherwise.
std::optional<int64_t> as_integer(const Json& v);

}  // namespace keel::server
