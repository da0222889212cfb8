// ArgBinder: binds a call's positional and keyword arguments to a built-in's parameter list the
// way Python does, with typed getters whose errors name the built-in and the parameter. Also the
// attribute-path lookup shared by map/selectattr/sort/join (`attribute="a.b"`).
//
// Thread safety: one owner (a single call).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "jinja/value.h"

namespace keel::jinja {

class ArgBinder {
 public:
  // InvalidArgument for too many positional arguments, unknown or repeated keywords.
  static Result<ArgBinder> bind(std::string_view fn, const CallArgs& args,
                                std::vector<std::string_view> params);

  // The argument bound to parameter i, or nullptr when not given.
  [[nodiscard]] const Value* get(size_t i) const {
    return bound_[i].has_value() ? &*bound_[i] : nullptr;
  }
  [[nodiscard]] Value value_or(size_t i, Value fallback) const {
    const Value* v = get(i);
    return v ? *v : std::move(fallback);
  }
  // A string parameter (absent or none -> nullopt when optional, else fallback).
  Result<std::optional<std::string>> opt_string(size_t i) const;
  Result<std::string> string_or(size_t i, std::string fallback) const;
  Result<int64_t> int_or(size_t i, int64_t fallback) const;
  Result<std::optional<int64_t>> opt_int(size_t i) const;
  [[nodiscard]] bool bool_or(size_t i, bool fallback) const {
    const Value* v = get(i);
    return v ? v->truthy() : fallback;
  }

 private:
  Status type_error(size_t i, std::string_view want) const;

  std::string fn_;
  std::vector<std::string_view> params_;
  std::vector<std::optional<Value>> bound_;
};

// Looks up a dotted attribute path in dicts, namespaces and lists ("function.name", "0");
// undefined when any step is missing.
Value lookup_attribute_path(const Value& item, std::string_view path);

}  // namespace keel::jinja
