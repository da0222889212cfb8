// Field readers (see json_fields.h). Messages follow one pattern: "`field` must be <rule>, got
// <value or type>", so clients see both the rule and what they sent.
#include "server/json_fields.h"

#include <fmt/format.h>

#include <cmath>

namespace keel::server {

const Json* field(const Json& obj, std::string_view name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::string_view json_type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string:
      return "a string";
    case Json::value_t::boolean:
      return "a boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "an integer";
    case Json::value_t::number_float:
      return "a number";
    case Json::value_t::binary:
    case Json::value_t::discarded:
      break;
  }
  return "an unsupported value";
}

std::string describe_value(const Json& v) {
  if (v.is_array() || v.is_object()) return std::string(json_type_name(v));
  std::string text = v.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() > 64) text = text.substr(0, 60) + "...";
  return text;
}

ApiError type_error(std::string_view name, std::string_view what, const Json& got) {
  return ApiError::bad_request(
      fmt::format("`{}` must be {}, got {}", name, what, json_type_name(got)), std::string(name));
}

MaybeError read_bool(const Json& obj, std::string_view name, bool* out) {
  const Json* v = field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) return type_error(name, "a boolean", *v);
  *out = v->get<bool>();
  return std::nullopt;
}

MaybeError read_string(const Json& obj, std::string_view name, std::optional<std::string>* out) {
  const Json* v = field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) return type_error(name, "a string", *v);
  *out = v->get<std::string>();
  return std::nullopt;
}

std::optional<int64_t> as_integer(const Json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exactly representable; anything at or above it does not fit.
    if (std::isfinite(d) && std::floor(d) == d && d >= -9.2233720368547758e18 &&
        d < 9.2233720368547758e18) {
      return static_cast<int64_t>(d);
    }
  }
  return std::nullopt;
}

MaybeError read_int(const Json& obj, std::string_view name, int64_t lo, int64_t hi,
                    std::optional<int64_t>* out) {
  const Json* v = field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return type_error(name, "an integer", *v);
  const std::optional<int64_t> i = as_integer(*v);
  if (!i || *i < lo || *i > hi) {
    return ApiError::bad_request(fmt::format("`{}` must be an integer in [{}, {}], got {}", name,
                                             lo, hi, describe_value(*v)),
                                 std::string(name));
  }
  *out = *i;
  return std::nullopt;
}

MaybeError read_number(const Json& obj, std::string_view name, double lo, double hi, bool lo_open,
                       std::optional<double>* out) {
  const Json* v = field(obj, name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) return type_error(name, "a number", *v);
  const double d = v->get<double>();
  const bool above_lo = lo_open ? d > lo : d >= lo;
  if (!std::isfinite(d) || !above_lo || d > hi) {
    return ApiError::bad_request(fmt::format("`{}` must be a number in {}{}, {}], got {}", name,
                                             lo_open ? "(" : "[", lo, hi, describe_value(*v)),
                                 std::string(name));
  }
  *out = d;
  return std::nullopt;
}

}  // namespace keel::server
