// Jinja filters with Jinja2's signatures and Hugging Face's `tojson` (see builtins.h). Strings
// are converted with Python's str() where Jinja2 does (trim, upper, replace, ...).
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/json_text.h"
#include "jinja/py_string.h"

namespace keel::jinja {
namespace {

using FilterFn = Result<Value> (*)(const Value& v, CallArgs& args, BuiltinContext& ctx);

Result<Value> charged_string(std::string s, BuiltinContext& ctx) {
  KEEL_TRY(ctx.charge(s.size()));
  return Value(std::move(s));
}

Result<Value> charged_list(Value::List items, BuiltinContext& ctx) {
  KEEL_TRY(ctx.charge(16 * items.size()));
  return Value(std::move(items));
}

Result<Value> f_trim(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("trim", args, {"chars"}));
  KEEL_ASSIGN_OR_RETURN(auto chars, b.opt_string(0));
  return charged_string(py_strip(v.to_str(), chars, true, true), ctx);
}

Result<Value> f_length(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("length", args, {}).status());
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return Value(0);
    case ValueKind::kString:
      return Value(static_cast<int64_t>(codepoint_count(v.as_string())));
    case ValueKind::kList:
      return Value(static_cast<int64_t>(v.as_list().size()));
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return Value(static_cast<int64_t>(v.as_dict().entries.size()));
    default:
      return Status::invalid_argument("length: object of type '" + std::string(v.type_name()) +
                                      "' has no len()");
  }
}

Result<Value> f_tojson(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(
      ArgBinder b,
      ArgBinder::bind("tojson", args, {"indent", "ensure_ascii", "separators", "sort_keys"}));
  KEEL_ASSIGN_OR_RETURN(auto indent, b.opt_int(0));
  if (b.bool_or(1, false)) return Status::unsupported("tojson: ensure_ascii=true is not supported");
  if (b.get(2) && !b.get(2)->is_none()) {
    return Status::unsupported("tojson: custom separators are not supported");
  }
  if (indent && (*indent < 0 || *indent > 1024)) {
    return Status::invalid_argument("tojson: indent must be between 0 and 1024");
  }
  std::optional<int> ind;
  if (indent) ind = static_cast<int>(*indent);
  KEEL_ASSIGN_OR_RETURN(std::string text,
                        to_json(v, ind, b.bool_or(3, false), ctx.max_work - ctx.work_used));
  return charged_string(std::move(text), ctx);
}

Result<Value> f_upper(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("upper", args, {}).status());
  return charged_string(py_upper(v.to_str()), ctx);
}

Result<Value> f_lower(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("lower", args, {}).status());
  return charged_string(py_lower(v.to_str()), ctx);
}

Result<Value> f_title(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("title", args, {}).status());
  return charged_string(py_title(v.to_str()), ctx);
}

Result<Value> f_capitalize(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("capitalize", args, {}).status());
  return charged_string(py_capitalize(v.to_str()), ctx);
}

Result<Value> f_default(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b,
                        ArgBinder::bind("default", args, {"default_value", "boolean"}));
  if (v.is_undefined() || (b.bool_or(1, false) && !v.truthy())) return b.value_or(0, Value(""));
  return v;
}

Result<Value> f_join(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("join", args, {"d", "attribute"}));
  KEEL_ASSIGN_OR_RETURN(std::string sep, b.string_or(0, ""));
  KEEL_ASSIGN_OR_RETURN(auto attr, b.opt_string(1));
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "join"));
  if (attr) {
    for (Value& item : items) item = lookup_attribute_path(item, *attr);
  }
  KEEL_ASSIGN_OR_RETURN(std::string joined, join_strings(items, sep, ctx));
  return Value(std::move(joined));
}

Result<Value> f_replace(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("replace", args, {"old", "new", "count"}));
  if (!b.get(0) || !b.get(1)) return Status::invalid_argument("replace: needs old and new");
  CallArgs method_args;
  method_args.positional = {*b.get(0), *b.get(1)};
  if (b.get(2)) method_args.positional.push_back(*b.get(2));
  Value method = get_method(Value(v.to_str()), "replace", &ctx);
  return method.as_callable().fn(method_args);
}

Result<Value> f_items(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("items", args, {}).status());
  if (v.is_undefined()) return Value(Value::List{});
  if (!v.is_dict() && !v.is_namespace()) {
    return Status::invalid_argument("items: expected a mapping, got " + std::string(v.type_name()));
  }
  Value::List pairs;
  for (const auto& [k, val] : v.as_dict().entries) pairs.emplace_back(Value::List{Value(k), val});
  return charged_list(std::move(pairs), ctx);
}

Result<Value> f_list(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("list", args, {}).status());
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "list"));
  return charged_list(std::move(items), ctx);
}

Result<Value> f_string(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("string", args, {}).status());
  if (v.is_string()) return v;
  return charged_string(v.to_str(), ctx);
}

Result<Value> f_first(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("first", args, {}).status());
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "first"));
  return items.empty() ? Value::undefined("first") : items.front();
}

Result<Value> f_last(const Value& v, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("last", args, {}).status());
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "last"));
  return items.empty() ? Value::undefined("last") : items.back();
}

Result<Value> f_reverse(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("reverse", args, {}).status());
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "reverse"));
  std::reverse(items.begin(), items.end());
  if (v.is_string()) {
    KEEL_ASSIGN_OR_RETURN(std::string s, join_strings(items, "", ctx));
    return Value(std::move(s));
  }
  return charged_list(std::move(items), ctx);
}

// Jinja's select/reject (by test) and selectattr/rejectattr (by attribute, then test).
Result<Value> select_impl(std::string_view fn, const Value& v, CallArgs& args, bool by_attr,
                          bool keep_when, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, fn));
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return Status::invalid_argument(std::string(fn) + ": needs an attribute name");
    }
    attr = args.positional[next++].as_string();
  }
  std::string test;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) {
      return Status::invalid_argument(std::string(fn) + ": the test name must be a string");
    }
    test = args.positional[next++].as_string();
  }
  CallArgs test_args;
  test_args.positional.assign(args.positional.begin() + static_cast<ptrdiff_t>(next),
                              args.positional.end());
  test_args.named = args.named;
  Value::List out;
  for (const Value& item : items) {
    Value subject = by_attr ? lookup_attribute_path(item, attr) : item;
    bool pass = subject.truthy();
    if (!test.empty()) {
      CallArgs a = test_args;
      KEEL_ASSIGN_OR_RETURN(pass, apply_test(test, subject, a, ctx));
    }
    if (pass == keep_when) out.push_back(item);
  }
  return charged_list(std::move(out), ctx);
}

Result<Value> f_select(const Value& v, CallArgs& a, BuiltinContext& c) {
  return select_impl("select", v, a, false, true, c);
}
Result<Value> f_reject(const Value& v, CallArgs& a, BuiltinContext& c) {
  return select_impl("reject", v, a, false, false, c);
}
Result<Value> f_selectattr(const Value& v, CallArgs& a, BuiltinContext& c) {
  return select_impl("selectattr", v, a, true, true, c);
}
Result<Value> f_rejectattr(const Value& v, CallArgs& a, BuiltinContext& c) {
  return select_impl("rejectattr", v, a, true, false, c);
}

Result<Value> f_map(const Value& v, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(Value::List items, iterable_items(v, "map"));
  Value::List out;
  out.reserve(items.size());
  std::optional<std::string> attribute;
  Value fallback = Value::undefined("");
  for (const auto& [key, value] : args.named) {
    if (key == "attribute" && value.is_string()) {
      attribute = value.as_string();
    } else if (key == "default") {
      fallback = value;
    } else if (!attribute) {
      return Status::invalid_argument("map: unexpected keyword argument '" + key + "'");
    }
  }
  if (attribute) {
    for (const Value& item : items) {
      Value a = lookup_attribute_path(item, *attribute);
      out.push_back(a.is_undefined() ? fallback : a);
    }
    return charged_list(std::move(out), ctx);
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return Status::invalid_argument("map: needs a filter name or attribute=");
  }
  std::string filter = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.named = args.named;
  for (const Value& item : items) {
    CallArgs a = rest;
    KEEL_ASSIGN_OR_RETURN(Value r, apply_filter(filter, item, a, ctx));
    out.push_back(std::move(r));
  }
  return charged_list(std::move(out), ctx);
}

}  // namespace

// Defined in filters_more.cpp.
Result<Value> apply_more_filter(std::string_view name, const Value& value, CallArgs& args,
                                BuiltinContext& ctx, bool* found);

Result<Value> apply_filter(std::string_view name, const Value& value, CallArgs& args,
                           BuiltinContext& ctx) {
  static const std::unordered_map<std::string_view, FilterFn> kFilters = {
      {"trim", f_trim},
      {"length", f_length},
      {"count", f_length},
      {"tojson", f_tojson},
      {"upper", f_upper},
      {"lower", f_lower},
      {"title", f_title},
      {"capitalize", f_capitalize},
      {"default", f_default},
      {"d", f_default},
      {"join", f_join},
      {"replace", f_replace},
      {"items", f_items},
      {"list", f_list},
      {"string", f_string},
      {"first", f_first},
      {"last", f_last},
      {"reverse", f_reverse},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"map", f_map},
  };
  auto it = kFilters.find(name);
  if (it != kFilters.end()) return it->second(value, args, ctx);
  bool found = false;
  auto r = apply_more_filter(name, value, args, ctx, &found);
  if (found) return r;
  return Status::invalid_argument("unknown filter '" + std::string(name) + "'");
}

}  // namespace keel::jinja
