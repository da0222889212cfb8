// Built-ins of the Jinja2 subset: filters (`x | trim`), tests (`x is defined`), methods of str,
// dict and list (`s.startswith(...)`, `d.items()`), and global functions (range, namespace,
// dict, raise_exception, strftime_now, joiner, cycler). Each reports misuse (wrong types, wrong
// argument counts) as an InvalidArgument Status whose message names the built-in; the caller
// adds the template location.
//
// Every built-in whose result can be much larger than its inputs (str * n, replace, join,
// range, center, indent, ...) charges the size to BuiltinContext::charge() before allocating, so
// a render's total allocation stays within its work budget.
//
// Thread safety: functions are pure apart from the context they are given.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

#include "core/result.h"
#include "jinja/value.h"

namespace keel::jinja {

// What built-ins may use from the render that calls them.
struct BuiltinContext {
  uint64_t work_used = 0;
  uint64_t max_work = 0;
  std::function<std::chrono::system_clock::time_point()> now;  // never null during a render

  // Adds `units` (bytes of string, or 16 per list/dict slot) to the work used; ResourceExhausted
  // past max_work.
  Status charge(uint64_t units);
};

// Applies filter `name`; unknown filters are an InvalidArgument.
Result<Value> apply_filter(std::string_view name, const Value& value, CallArgs& args,
                           BuiltinContext& ctx);

// Applies test `name` (defined, none, string, equalto, ...); unknown tests are InvalidArgument.
Result<bool> apply_test(std::string_view name, const Value& value, CallArgs& args,
                        BuiltinContext& ctx);

// `obj.name` for the methods of str, dict and list: a callable bound to `obj`, or undefined when
// the type has no such method. The callable keeps `ctx` by pointer: use it within the render.
Value get_method(const Value& obj, std::string_view name, BuiltinContext* ctx);

// The global functions, bound to `ctx` (same lifetime rule as get_method).
Dict make_globals(BuiltinContext* ctx);

// Python str.join of `items` converted with str(), charged to ctx.
Result<std::string> join_strings(const Value::List& items, std::string_view separator,
                                 BuiltinContext& ctx);

}  // namespace keel::jinja
