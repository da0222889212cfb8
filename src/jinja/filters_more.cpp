// The less common Jinja filters: numbers (abs, int, float, round, sum, min, max), ordering
// (sort, unique, dictsort), text layout (indent, center, wordcount, escape) and pass-throughs
// (safe). Dispatched from apply_filter() in filters.cpp.
#include <algorithm>
#include <charconv>
#include <cmath>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/interpreter.h"
#include "jinja/py_string.h"

namespace keel::jinja {
namespace {

Result<Value::List> list_of(std::string_view fn, const Value& v) {
  if (v.is_list()) return v.as_list();
  if (v.is_undefined()) return Value::List{};
  if (v.is_dict()) {
    Value::List keys;
    for (const auto& e : v.as_dict().entries) keys.emplace_back(e.first);
    return keys;
  }
  return Status::invalid_argument(std::string(fn) + ": expected a list, got " +
                                  std::string(v.type_name()));
}

// Sort key: the attribute (when given), lower-cased when not case sensitive.
Value sort_key(const Value& item, const std::optional<std::string>& attr, bool case_sensitive) {
  Value k = attr ? lookup_attribute_path(item, *attr) : item;
  if (!case_sensitive && k.is_string()) return Value(py_lower(k.as_string()));
  return k;
}

Status sort_values(std::vector<std::pair<Value, Value>>* keyed, bool reverse) {
  Status error;
  std::stable_sort(keyed->begin(), keyed->end(), [&](const auto& a, const auto& b) {
    if (!error.ok()) return false;
    auto c = reverse ? compare_values(b.first, a.first) : compare_values(a.first, b.first);
    if (!c.ok()) {
      error = c.error();
      return false;
    }
    return *c < 0;
  });
  return error;
}

Result<Value> f_sort(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b,
                        ArgBinder::bind("sort", args, {"reverse", "case_sensitive", "attribute"}));
  KEEL_ASSIGN_OR_RETURN(Value::List items, list_of("sort", v));
  KEEL_ASSIGN_OR_RETURN(auto attr, b.opt_string(2));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items)
    keyed.emplace_back(sort_key(item, attr, b.bool_or(1, false)), item);
  KEEL_TRY(sort_values(&keyed, b.bool_or(0, false)));
  KEEL_TRY(ctx.charge(16 * keyed.size()));
  Value::List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value(std::move(out));
}

Result<Value> f_dictsort(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b,
                        ArgBinder::bind("dictsort", args, {"case_sensitive", "by", "reverse"}));
  if (!v.is_dict()) return Status::invalid_argument("dictsort: expected a dict");
  KEEL_ASSIGN_OR_RETURN(std::string by, b.string_or(1, "key"));
  std::vector<std::pair<Value, Value>> keyed;
  for (const auto& [k, val] : v.as_dict().entries) {
    Value pair(Value::List{Value(k), val});
    keyed.emplace_back(sort_key(by == "value" ? val : Value(k), std::nullopt, b.bool_or(0, false)),
                       pair);
  }
  KEEL_TRY(sort_values(&keyed, b.bool_or(2, false)));
  KEEL_TRY(ctx.charge(16 * keyed.size()));
  Value::List out;
  for (auto& kv : keyed) out.push_back(std::move(kv.second));
  return Value(std::move(out));
}

Result<Value> f_unique(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b,
                        ArgBinder::bind("unique", args, {"case_sensitive", "attribute"}));
  KEEL_ASSIGN_OR_RETURN(Value::List items, list_of("unique", v));
  KEEL_ASSIGN_OR_RETURN(auto attr, b.opt_string(1));
  Value::List out;
  std::vector<Value> seen;
  for (const Value& item : items) {
    Value k = sort_key(item, attr, b.bool_or(0, false));
    bool dup = false;
    for (const Value& s : seen) dup = dup || values_equal(s, k);
    if (dup) continue;
    KEEL_TRY(ctx.charge(16));
    seen.push_back(k);
    out.push_back(item);
  }
  return Value(std::move(out));
}

Result<Value> f_minmax(std::string_view fn, const Value& v, CallArgs& args, bool want_max) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind(fn, args, {"case_sensitive", "attribute"}));
  KEEL_ASSIGN_OR_RETURN(Value::List items, list_of(fn, v));
  KEEL_ASSIGN_OR_RETURN(auto attr, b.opt_string(1));
  if (items.empty()) return Value::undefined(std::string(fn) + " of an empty sequence");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    KEEL_ASSIGN_OR_RETURN(int c, compare_values(sort_key(items[i], attr, b.bool_or(0, false)),
                                                sort_key(items[best], attr, b.bool_or(0, false))));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Result<Value> f_min(const Value& v, CallArgs& a, BuiltinContext&) {
  return f_minmax("min", v, a, false);
}
Result<Value> f_max(const Value& v, CallArgs& a, BuiltinContext&) {
  return f_minmax("max", v, a, true);
}

Result<Value> f_sum(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("sum", args, {"attribute", "start"}));
  KEEL_ASSIGN_OR_RETURN(Value::List items, list_of("sum", v));
  KEEL_ASSIGN_OR_RETURN(auto attr, b.opt_string(0));
  Value total = b.value_or(1, Value(0));
  for (const Value& item : items) {
    KEEL_ASSIGN_OR_RETURN(
        total, binary_op("+", total, attr ? lookup_attribute_path(item, *attr) : item, ctx));
  }
  return total;
}

Result<Value> f_abs(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("abs", args, {}).status());
  if (v.is_float()) return Value(std::fabs(v.as_double()));
  if (v.is_int() || v.is_bool()) {
    int64_t i = v.as_int();
    if (i == INT64_MIN) return Status::invalid_argument("abs: integer overflow");
    return Value(i < 0 ? -i : i);
  }
  return Status::invalid_argument("abs: bad operand type '" + std::string(v.type_name()) + "'");
}

Result<Value> f_int(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("int", args, {"default", "base"}));
  Value fallback = b.value_or(0, Value(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    double d = v.as_double();
    if (!std::isfinite(d) || std::fabs(d) >= 9.2e18) return fallback;
    return Value(static_cast<int64_t>(d));
  }
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    int64_t out = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), out);
    if (res.ec == std::errc() && res.ptr == s.data() + s.size() && !s.empty()) return Value(out);
    double d = 0;
    auto fres = std::from_chars(s.data(), s.data() + s.size(), d);
    if (fres.ec == std::errc() && fres.ptr == s.data() + s.size() && std::isfinite(d) &&
        std::fabs(d) < 9.2e18) {
      return Value(static_cast<int64_t>(d));
    }
  }
  return fallback;
}

Result<Value> f_float(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("float", args, {"default"}));
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.as_string(), std::nullopt, true, true);
    double d = 0;
    auto res = std::from_chars(s.data(), s.data() + s.size(), d);
    if (res.ec == std::errc() && res.ptr == s.data() + s.size() && !s.empty()) return Value(d);
  }
  return b.value_or(0, Value(0.0));
}

Result<Value> f_round(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("round", args, {"precision", "method"}));
  if (!v.is_number()) return Status::invalid_argument("round: expected a number");
  KEEL_ASSIGN_OR_RETURN(int64_t precision, b.int_or(0, 0));
  KEEL_ASSIGN_OR_RETURN(std::string method, b.string_or(1, "common"));
  precision = std::clamp<int64_t>(precision, -300, 300);
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  // "common" rounds half to even, as Python's round().
  double r = method == "ceil"    ? std::ceil(x)
             : method == "floor" ? std::floor(x)
                                 : std::nearbyint(x);
  if (method != "common" && method != "ceil" && method != "floor") {
    return Status::invalid_argument("round: method must be common, ceil or floor");
  }
  return Value(r / scale);
}

Result<Value> f_safe(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("safe", args, {}).status());
  return v;
}

Result<Value> f_escape(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("escape", args, {}).status());
  std::string out;
  for (char c : v.to_str()) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  KEEL_TRY(ctx.charge(out.size()));
  return Value(std::move(out));
}

Result<Value> f_indent(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("indent", args, {"width", "first", "blank"}));
  std::string pad;
  if (b.get(0) && b.get(0)->is_string()) {
    pad = b.get(0)->as_string();
  } else {
    KEEL_ASSIGN_OR_RETURN(int64_t width, b.int_or(0, 4));
    if (width < 0 || width > 4096) return Status::invalid_argument("indent: width out of range");
    pad.assign(static_cast<size_t>(width), ' ');
  }
  // Jinja2's algorithm: append "\n", split into lines, indent all but the first.
  std::string s = v.to_str() + "\n";
  KEEL_ASSIGN_OR_RETURN(std::vector<std::string> lines, py_split(s, std::string("\n"), -1, false));
  lines.pop_back();  // the empty piece after the final "\n"
  KEEL_TRY(ctx.charge(s.size() + pad.size() * (lines.size() + 1)));
  std::string out = lines.empty() ? "" : lines[0];
  for (size_t i = 1; i < lines.size(); ++i) {
    out += '\n';
    if (b.bool_or(2, false) || !lines[i].empty()) out += pad;
    out += lines[i];
  }
  if (b.bool_or(1, false)) out = pad + out;
  return Value(std::move(out));
}

Result<Value> f_center(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("center", args, {"width"}));
  KEEL_ASSIGN_OR_RETURN(int64_t width, b.int_or(0, 80));
  std::string s = v.to_str();
  auto len = static_cast<int64_t>(codepoint_count(s));
  if (width <= len) return Value(std::move(s));
  KEEL_TRY(ctx.charge(static_cast<uint64_t>(width) + s.size()));
  int64_t total = width - len;
  int64_t left = total / 2 + (total & width & 1);  // Python's centering rule
  return Value(std::string(static_cast<size_t>(left), ' ') + s +
               std::string(static_cast<size_t>(total - left), ' '));
}

Result<Value> f_wordcount(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("wordcount", args, {}).status());
  KEEL_ASSIGN_OR_RETURN(auto words, py_split(v.to_str(), std::nullopt, -1, false));
  return Value(static_cast<int64_t>(words.size()));
}

Result<Value> f_attr(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("attr", args, {"name"}));
  KEEL_ASSIGN_OR_RETURN(std::string name, b.string_or(0, ""));
  if (v.is_namespace()) {
    const Value* a = v.as_dict().find(name);
    return a ? *a : Value::undefined(name);
  }
  return get_method(v, name, &ctx);
}

}  // namespace

Result<Value> apply_more_filter(std::string_view name, const Value& value, CallArgs& args,
                                BuiltinContext& ctx, bool* found) {
  using FilterFn = Result<Value> (*)(const Value&, CallArgs&, BuiltinContext&);
  static constexpr std::pair<std::string_view, FilterFn> kFilters[] = {
      {"sort", f_sort},     {"dictsort", f_dictsort},
      {"unique", f_unique}, {"min", f_min},
      {"max", f_max},       {"sum", f_sum},
      {"abs", f_abs},       {"int", f_int},
      {"float", f_float},   {"round", f_round},
      {"safe", f_safe},     {"escape", f_escape},
      {"e", f_escape},      {"indent", f_indent},
      {"center", f_center}, {"wordcount", f_wordcount},
      {"attr", f_attr},
  };
  for (const auto& [n, fn] : kFilters) {
    if (n == name) {
      *found = true;
      return fn(value, args, ctx);
    }
  }
  *found = false;
  return Status::invalid_argument("unknown filter");
}

}  // namespace keel::jinja
