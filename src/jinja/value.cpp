// Value: construction, accessors, truthiness, str()/repr(), equality and ordering with Python
// semantics (see value.h).
#include "jinja/value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "jinja/py_string.h"

namespace keel::jinja {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value value) {
  for (auto& [k, v] : entries) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Value::make_namespace(Dict attrs) {
  return Value(Data(NamespaceRef{std::make_shared<Dict>(std::move(attrs))}));
}

Value Value::make_callable(std::string name, std::function<Result<Value>(CallArgs&)> fn) {
  auto c = std::make_shared<Callable>();
  c->name = std::move(name);
  c->fn = std::move(fn);
  return Value(Data(std::shared_ptr<const Callable>(std::move(c))));
}

bool Value::as_bool() const {
  KEEL_CHECK(is_bool());
  return std::get<bool>(data_);
}

int64_t Value::as_int() const {
  if (is_bool()) return std::get<bool>(data_) ? 1 : 0;
  KEEL_CHECK(is_int());
  return std::get<int64_t>(data_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(data_);
  return static_cast<double>(as_int());
}

const std::string& Value::as_string() const {
  KEEL_CHECK(is_string());
  return std::get<std::shared_ptr<const Str>>(data_)->text;
}

const TextSpans& Value::plain_spans() const {
  static const TextSpans kNone;
  if (!is_string()) return kNone;
  return std::get<std::shared_ptr<const Str>>(data_)->plain;
}

const void* Value::string_identity() const {
  if (!is_string()) return nullptr;
  return std::get<std::shared_ptr<const Str>>(data_).get();
}

Value Value::plain(std::string s) {
  TextSpans spans;
  append_span(&spans, 0, s.size());
  return with_spans(std::move(s), std::move(spans));
}

Value Value::with_spans(std::string s, TextSpans spans) {
  return Value(Data(std::make_shared<const Str>(Str{std::move(s), std::move(spans)})));
}

const Value::List& Value::as_list() const {
  KEEL_CHECK(is_list());
  return *std::get<std::shared_ptr<const List>>(data_);
}

const Dict& Value::as_dict() const {
  if (is_namespace()) return *std::get<NamespaceRef>(data_).attrs;
  KEEL_CHECK(is_dict());
  return *std::get<DictRef>(data_).dict;
}

Dict& Value::namespace_attrs() const {
  KEEL_CHECK(is_namespace());
  return *std::get<NamespaceRef>(data_).attrs;
}

const Callable& Value::as_callable() const {
  KEEL_CHECK(is_callable());
  return *std::get<std::shared_ptr<const Callable>>(data_);
}

const std::string& Value::undefined_name() const {
  KEEL_CHECK(is_undefined());
  return std::get<Undefined>(data_).name;
}

bool Value::truthy() const {
  switch (kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return false;
    case ValueKind::kBool:
      return as_bool();
    case ValueKind::kInt:
      return as_int() != 0;
    case ValueKind::kFloat:
      return as_double() != 0.0;
    case ValueKind::kString:
      return !as_string().empty();
    case ValueKind::kList:
      return !as_list().empty();
    case ValueKind::kDict:
      return !as_dict().entries.empty();
    case ValueKind::kNamespace:
    case ValueKind::kCallable:
      return true;
  }
  return false;
}

bool exceeds_depth(const Value& v, int max_depth) {
  if (!v.is_list() && !v.is_dict() && !v.is_namespace()) return false;
  if (max_depth <= 0) return true;
  if (v.is_list()) {
    for (const Value& item : v.as_list()) {
      if (exceeds_depth(item, max_depth - 1)) return true;
    }
    return false;
  }
  for (const auto& entry : v.as_dict().entries) {
    if (exceeds_depth(entry.second, max_depth - 1)) return true;
  }
  return false;
}

Result<Value::List> iterable_items(const Value& v, std::string_view fn) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
      return Value::List{};
    case ValueKind::kList:
      return v.as_list();
    case ValueKind::kDict: {
      Value::List keys;
      for (const auto& entry : v.as_dict().entries) keys.emplace_back(entry.first);
      return keys;
    }
    case ValueKind::kString: {
      const std::string& s = v.as_string();
      const std::vector<size_t> offsets = codepoint_offsets(s);
      Value::List chars;
      for (size_t i = 0; i + 1 < offsets.size(); ++i) {
        chars.emplace_back(s.substr(offsets[i], offsets[i + 1] - offsets[i]));
      }
      return chars;
    }
    default:
      return Status::invalid_argument((fn.empty() ? "" : std::string(fn) + ": ") + "'" +
                                      std::string(v.type_name()) + "' object is not iterable");
  }
}

bool holds_reference(const Value& v) {
  if (v.is_namespace() || v.is_callable()) return true;
  if (v.is_list()) {
    for (const Value& item : v.as_list()) {
      if (holds_reference(item)) return true;
    }
  } else if (v.is_dict()) {
    for (const auto& entry : v.as_dict().entries) {
      if (holds_reference(entry.second)) return true;
    }
  }
  return false;
}

std::string format_python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  if (d == 0.0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, then Python's layout rules.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits += sci[i];
  }
  int exponent = std::stoi(sci.substr(e_pos + 1));
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exponent) + 1) + "." +
             digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp_buf[16];
  std::snprintf(exp_buf, sizeof(exp_buf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp_buf;
}

namespace {

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == quote) {
          out += '\\';
          out += c;
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += quote;
  return out;
}

}  // namespace

std::string Value::to_str() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "";
    case ValueKind::kString:
      return as_string();
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "";
    case ValueKind::kNone:
      return "None";
    case ValueKind::kBool:
      return as_bool() ? "True" : "False";
    case ValueKind::kInt:
      return std::to_string(as_int());
    case ValueKind::kFloat:
      return format_python_float(as_double());
    case ValueKind::kString:
      return repr_string(as_string());
    case ValueKind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < as_list().size(); ++i) {
        if (i > 0) out += ", ";
        out += as_list()[i].repr();
      }
      return out + "]";
    }
    case ValueKind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().entries) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + v.repr();
      }
      return out + "}";
    }
    case ValueKind::kNamespace:
      return "<Namespace>";
    case ValueKind::kCallable:
      return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string_view Value::type_name() const {
  switch (kind()) {
    case ValueKind::kUndefined:
      return "undefined";
    case ValueKind::kNone:
      return "NoneType";
    case ValueKind::kBool:
      return "bool";
    case ValueKind::kInt:
      return "int";
    case ValueKind::kFloat:
      return "float";
    case ValueKind::kString:
      return "str";
    case ValueKind::kList:
      return "list";
    case ValueKind::kDict:
      return "dict";
    case ValueKind::kNamespace:
      return "Namespace";
    case ValueKind::kCallable:
      return "function";
  }
  return "?";
}

bool values_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone:
      return true;
    case ValueKind::kString:
      return a.as_string() == b.as_string();
    case ValueKind::kList: {
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!values_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      const auto& x = a.as_dict().entries;
      const Dict& y = b.as_dict();
      if (x.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = y.find(k);
        if (other == nullptr || !values_equal(v, *other)) return false;
      }
      return true;
    }
    case ValueKind::kNamespace:
      return &a.namespace_attrs() == &b.namespace_attrs();
    case ValueKind::kCallable:
      return &a.as_callable() == &b.as_callable();
    case ValueKind::kBool:
    case ValueKind::kInt:
    case ValueKind::kFloat:
      break;  // handled above
  }
  return false;
}

Result<int> compare_values(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double();
      double y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int();
    int64_t y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // Byte order of UTF-8 is code point order.
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (values_equal(x[i], y[i])) continue;
      return compare_values(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  return Status::invalid_argument("cannot compare " + std::string(a.type_name()) + " with " +
                                  std::string(b.type_name()));
}

}  // namespace keel::jinja
