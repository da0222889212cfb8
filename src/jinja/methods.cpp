// Methods of str, dict and list values (only the non-mutating ones, as in Jinja's immutable
// sandbox) and the global functions (see builtins.h).
#include <ctime>

#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/plain_spans.h"
#include "jinja/py_string.h"

namespace keel::jinja {

Result<std::string> join_strings(const Value::List& items, std::string_view separator,
                                 BuiltinContext& ctx) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string part = items[i].to_str();
    KEEL_TRY(ctx.charge(part.size() + (i > 0 ? separator.size() : 0)));
    if (i > 0) out += separator;
    out += part;
  }
  return out;
}

namespace {

using Method = Result<Value> (*)(const Value& self, CallArgs& args, BuiltinContext& ctx);

// Prefixes for startswith/endswith: a string or a list (tuple) of strings.
Result<std::vector<std::string>> affixes(std::string_view fn, const ArgBinder& b) {
  const Value* v = b.get(0);
  if (v && v->is_string()) return std::vector<std::string>{v->as_string()};
  if (v && v->is_list()) {
    std::vector<std::string> out;
    for (const Value& item : v->as_list()) {
      if (!item.is_string()) break;
      out.push_back(item.as_string());
    }
    if (out.size() == v->as_list().size()) return out;
  }
  return Status::invalid_argument(std::string(fn) + ": expected a string or a tuple of strings");
}

Result<Value> m_startswith(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("startswith", args, {"prefix"}));
  KEEL_ASSIGN_OR_RETURN(auto prefixes, affixes("startswith", b));
  for (const std::string& p : prefixes) {
    if (self.as_string().compare(0, p.size(), p) == 0) return Value(true);
  }
  return Value(false);
}

Result<Value> m_endswith(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("endswith", args, {"suffix"}));
  KEEL_ASSIGN_OR_RETURN(auto suffixes, affixes("endswith", b));
  const std::string& s = self.as_string();
  for (const std::string& p : suffixes) {
    if (s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0)
      return Value(true);
  }
  return Value(false);
}

Result<Value> split_impl(std::string_view fn, const Value& self, CallArgs& args,
                         BuiltinContext& ctx, bool from_right) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind(fn, args, {"sep", "maxsplit"}));
  KEEL_ASSIGN_OR_RETURN(auto sep, b.opt_string(0));
  KEEL_ASSIGN_OR_RETURN(int64_t maxsplit, b.int_or(1, -1));
  KEEL_ASSIGN_OR_RETURN(auto parts, py_split(self.as_string(), sep, maxsplit, from_right));
  KEEL_TRY(ctx.charge(self.as_string().size() + 16 * parts.size()));
  Value::List out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.emplace_back(std::move(p));
  return Value(std::move(out));
}
Result<Value> m_split(const Value& s, CallArgs& a, BuiltinContext& c) {
  return split_impl("split", s, a, c, false);
}
Result<Value> m_rsplit(const Value& s, CallArgs& a, BuiltinContext& c) {
  return split_impl("rsplit", s, a, c, true);
}

Result<Value> strip_impl(std::string_view fn, const Value& self, CallArgs& args,
                         BuiltinContext& ctx, bool left, bool right) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind(fn, args, {"chars"}));
  KEEL_ASSIGN_OR_RETURN(auto chars, b.opt_string(0));
  std::string out = py_strip(self.as_string(), chars, left, right);
  KEEL_TRY(ctx.charge(out.size()));
  return Value(std::move(out));
}
Result<Value> m_strip(const Value& s, CallArgs& a, BuiltinContext& c) {
  return strip_impl("strip", s, a, c, true, true);
}
Result<Value> m_lstrip(const Value& s, CallArgs& a, BuiltinContext& c) {
  return strip_impl("lstrip", s, a, c, true, false);
}
Result<Value> m_rstrip(const Value& s, CallArgs& a, BuiltinContext& c) {
  return strip_impl("rstrip", s, a, c, false, true);
}

Result<Value> m_replace(const Value& self, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("replace", args, {"old", "new", "count"}));
  if (!b.get(0) || !b.get(1) || !b.get(0)->is_string() || !b.get(1)->is_string()) {
    return Status::invalid_argument("replace: old and new must be strings");
  }
  const std::string& old_s = b.get(0)->as_string();
  const std::string& new_s = b.get(1)->as_string();
  KEEL_ASSIGN_OR_RETURN(int64_t count, b.int_or(2, -1));
  const std::string& s = self.as_string();
  std::vector<size_t> cuts;  // positions where `old` is replaced (empty: between code points)
  if (old_s.empty()) {
    std::vector<size_t> offsets = codepoint_offsets(s);
    cuts = std::move(offsets);
  } else {
    for (size_t p = s.find(old_s); p != std::string::npos; p = s.find(old_s, p + old_s.size())) {
      cuts.push_back(p);
    }
  }
  if (count >= 0 && cuts.size() > static_cast<uint64_t>(count))
    cuts.resize(static_cast<size_t>(count));
  KEEL_TRY(ctx.charge(s.size() + cuts.size() * new_s.size()));
  std::string out;
  size_t pos = 0;
  for (size_t cut : cuts) {
    out.append(s, pos, cut - pos);
    out += new_s;
    pos = cut + old_s.size();
  }
  out.append(s, pos, std::string::npos);
  return Value(std::move(out));
}

Result<Value> m_upper(const Value& s, CallArgs& a, BuiltinContext& c) {
  KEEL_TRY(ArgBinder::bind("upper", a, {}).status());
  KEEL_TRY(c.charge(s.as_string().size()));
  return Value(py_upper(s.as_string()));
}
Result<Value> m_lower(const Value& s, CallArgs& a, BuiltinContext& c) {
  KEEL_TRY(ArgBinder::bind("lower", a, {}).status());
  KEEL_TRY(c.charge(s.as_string().size()));
  return Value(py_lower(s.as_string()));
}
Result<Value> m_title(const Value& s, CallArgs& a, BuiltinContext& c) {
  KEEL_TRY(ArgBinder::bind("title", a, {}).status());
  KEEL_TRY(c.charge(s.as_string().size()));
  return Value(py_title(s.as_string()));
}
Result<Value> m_capitalize(const Value& s, CallArgs& a, BuiltinContext& c) {
  KEEL_TRY(ArgBinder::bind("capitalize", a, {}).status());
  KEEL_TRY(c.charge(s.as_string().size()));
  return Value(py_capitalize(s.as_string()));
}

Result<Value> find_impl(std::string_view fn, const Value& self, CallArgs& args, bool count) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind(fn, args, {"sub"}));
  KEEL_ASSIGN_OR_RETURN(std::string sub, b.string_or(0, ""));
  const std::string& s = self.as_string();
  if (count) {
    if (sub.empty()) return Value(static_cast<int64_t>(codepoint_count(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  size_t p = fn == "rfind" ? s.rfind(sub) : s.find(sub);
  if (p == std::string::npos) return Value(-1);
  return Value(static_cast<int64_t>(codepoint_count(std::string_view(s).substr(0, p))));
}
Result<Value> m_find(const Value& s, CallArgs& a, BuiltinContext&) {
  return find_impl("find", s, a, false);
}
Result<Value> m_rfind(const Value& s, CallArgs& a, BuiltinContext&) {
  return find_impl("rfind", s, a, false);
}
Result<Value> m_count(const Value& s, CallArgs& a, BuiltinContext&) {
  return find_impl("count", s, a, true);
}

Result<Value> m_join(const Value& self, CallArgs& args, BuiltinContext& ctx) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("join", args, {"iterable"}));
  if (!b.get(0) || !b.get(0)->is_list()) return Status::invalid_argument("join: expected a list");
  for (const Value& item : b.get(0)->as_list()) {
    if (!item.is_string()) {
      return Status::invalid_argument("join: sequence item is " + std::string(item.type_name()) +
                                      ", expected str");
    }
  }
  KEEL_ASSIGN_OR_RETURN(std::string out, join_strings(b.get(0)->as_list(), self.as_string(), ctx));
  return Value(std::move(out));
}

template <bool (*Pred)(char)>
Result<Value> char_class(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_TRY(ArgBinder::bind("is*", args, {}).status());
  const std::string& s = self.as_string();
  if (s.empty()) return Value(false);
  for (char c : s) {
    if (!Pred(c)) return Value(false);
  }
  return Value(true);
}
bool is_digit_c(char c) { return c >= '0' && c <= '9'; }
bool is_alpha_c(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum_c(char c) { return is_digit_c(c) || is_alpha_c(c); }
bool is_space_c(char c) { return py_isspace_char(static_cast<unsigned char>(c)); }

Result<Value> m_items(const Value& self, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("items", args, {}).status());
  KEEL_TRY(ctx.charge(16 * self.as_dict().entries.size()));
  Value::List out;
  for (const auto& [k, v] : self.as_dict().entries) out.emplace_back(Value::List{Value(k), v});
  return Value(std::move(out));
}
Result<Value> m_keys(const Value& self, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("keys", args, {}).status());
  KEEL_TRY(ctx.charge(16 * self.as_dict().entries.size()));
  Value::List out;
  for (const auto& entry : self.as_dict().entries) out.emplace_back(entry.first);
  return Value(std::move(out));
}
Result<Value> m_values(const Value& self, CallArgs& args, BuiltinContext& ctx) {
  KEEL_TRY(ArgBinder::bind("values", args, {}).status());
  KEEL_TRY(ctx.charge(16 * self.as_dict().entries.size()));
  Value::List out;
  for (const auto& entry : self.as_dict().entries) out.push_back(entry.second);
  return Value(std::move(out));
}
Result<Value> m_get(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("get", args, {"key", "default"}));
  if (!b.get(0)) return Status::invalid_argument("get: needs a key");
  Value fallback = b.value_or(1, Value::none());
  if (!b.get(0)->is_string()) return fallback;
  const Value* v = self.as_dict().find(b.get(0)->as_string());
  return v ? *v : fallback;
}

Result<Value> m_list_index(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("index", args, {"value"}));
  const Value::List& items = self.as_list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (b.get(0) && values_equal(items[i], *b.get(0))) return Value(static_cast<int64_t>(i));
  }
  return Status::invalid_argument("index: value is not in list");
}
Result<Value> m_list_count(const Value& self, CallArgs& args, BuiltinContext&) {
  KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind("count", args, {"value"}));
  int64_t n = 0;
  for (const Value& item : self.as_list()) n += b.get(0) && values_equal(item, *b.get(0)) ? 1 : 0;
  return Value(n);
}

Method find_method(ValueKind kind, std::string_view name) {
  struct Entry {
    ValueKind kind;
    std::string_view name;
    Method fn;
  };
  static constexpr Entry kMethods[] = {
      {ValueKind::kString, "startswith", m_startswith},
      {ValueKind::kString, "endswith", m_endswith},
      {ValueKind::kString, "split", m_split},
      {ValueKind::kString, "rsplit", m_rsplit},
      {ValueKind::kString, "strip", m_strip},
      {ValueKind::kString, "lstrip", m_lstrip},
      {ValueKind::kString, "rstrip", m_rstrip},
      {ValueKind::kString, "replace", m_replace},
      {ValueKind::kString, "upper", m_upper},
      {ValueKind::kString, "lower", m_lower},
      {ValueKind::kString, "title", m_title},
      {ValueKind::kString, "capitalize", m_capitalize},
      {ValueKind::kString, "find", m_find},
      {ValueKind::kString, "rfind", m_rfind},
      {ValueKind::kString, "count", m_count},
      {ValueKind::kString, "join", m_join},
      {ValueKind::kString, "isdigit", char_class<is_digit_c>},
      {ValueKind::kString, "isalpha", char_class<is_alpha_c>},
      {ValueKind::kString, "isalnum", char_class<is_alnum_c>},
      {ValueKind::kString, "isspace", char_class<is_space_c>},
      {ValueKind::kDict, "items", m_items},
      {ValueKind::kDict, "keys", m_keys},
      {ValueKind::kDict, "values", m_values},
      {ValueKind::kDict, "get", m_get},
      {ValueKind::kList, "index", m_list_index},
      {ValueKind::kList, "count", m_list_count},
  };
  for (const Entry& e : kMethods) {
    if (e.kind == kind && e.name == name) return e.fn;
  }
  return nullptr;
}

}  // namespace

Value get_method(const Value& obj, std::string_view name, BuiltinContext* ctx) {
  Method fn = find_method(obj.kind(), name);
  if (fn == nullptr) return Value::undefined(std::string(name));
  return Value::make_callable(std::string(name), [obj, fn, ctx](CallArgs& args) -> Result<Value> {
    KEEL_ASSIGN_OR_RETURN(Value r, fn(obj, args, *ctx));
    return taint_new_strings(std::move(r), {&obj}, &args);
  });
}

}  // namespace keel::jinja
