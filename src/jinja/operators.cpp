// Python arithmetic and membership on template values (declared in interpreter.h): int results
// stay int (64-bit; overflow is an error rather than a silent wrap), `/` is true division, `//`
// and `%` floor like Python, `+` concatenates strings and lists, `*` repeats them.
#include <cmath>

#include "jinja/interpreter.h"

namespace keel::jinja {
namespace {

Status type_error(std::string_view op, const Value& a, const Value& b) {
  return Status::invalid_argument("unsupported operand types for " + std::string(op) + ": '" +
                                  std::string(a.type_name()) + "' and '" +
                                  std::string(b.type_name()) + "'");
}

Status overflow(std::string_view op) {
  return Status::invalid_argument("integer overflow in '" + std::string(op) + "'");
}

Result<Value> repeat(const Value& seq, int64_t times, BuiltinContext& ctx) {
  if (times < 0) times = 0;
  const auto n = static_cast<uint64_t>(times);
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (!s.empty() && n > ctx.max_work / s.size()) return ctx.charge(ctx.max_work + 1);
    KEEL_TRY(ctx.charge(s.size() * n));
    std::string out;
    out.reserve(s.size() * n);
    for (uint64_t i = 0; i < n; ++i) out += s;
    return Value(std::move(out));
  }
  const Value::List& items = seq.as_list();
  if (!items.empty() && n > ctx.max_work / (16 * items.size())) return ctx.charge(ctx.max_work + 1);
  KEEL_TRY(ctx.charge(16 * items.size() * n));
  Value::List out;
  out.reserve(items.size() * n);
  for (uint64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value(std::move(out));
}

Result<Value> int_op(std::string_view op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) return overflow(op);
    return Value(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) return overflow(op);
    return Value(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) return overflow(op);
    return Value(r);
  }
  if (op == "/") {
    if (y == 0) return Status::invalid_argument("division by zero");
    return Value(static_cast<double>(x) / static_cast<double>(y));
  }
  if (op == "//" || op == "%") {
    if (y == 0) return Status::invalid_argument("integer division or modulo by zero");
    if (x == INT64_MIN && y == -1)
      return op == "%" ? Value(int64_t{0}) : Result<Value>(overflow(op));
    int64_t q = x / y;
    int64_t m = x % y;
    if (m != 0 && ((m < 0) != (y < 0))) {
      --q;
      m += y;
    }
    return Value(op == "//" ? q : m);
  }
  if (op == "**") {
    if (y < 0) return Value(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t result = 1;
    int64_t base = x;
    while (y > 0) {
      if ((y & 1) != 0 && __builtin_mul_overflow(result, base, &result)) return overflow(op);
      y >>= 1;
      if (y > 0 && __builtin_mul_overflow(base, base, &base)) return overflow(op);
    }
    return Value(result);
  }
  return Status::invalid_argument("unknown operator '" + std::string(op) + "'");
}

Result<Value> float_op(std::string_view op, double x, double y) {
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "/") {
    if (y == 0.0) return Status::invalid_argument("float division by zero");
    return Value(x / y);
  }
  if (op == "//" || op == "%") {
    if (y == 0.0) return Status::invalid_argument("float modulo by zero");
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    if (op == "%") return Value(m);
    return Value(std::floor((x - m) / y + 0.5));
  }
  if (op == "**") return Value(std::pow(x, y));
  return Status::invalid_argument("unknown operator '" + std::string(op) + "'");
}

}  // namespace

Result<Value> binary_op(std::string_view op, const Value& a, const Value& b, BuiltinContext& ctx) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return float_op(op, a.as_double(), b.as_double());
    return int_op(op, a.as_int(), b.as_int());
  }
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      KEEL_TRY(ctx.charge(a.as_string().size() + b.as_string().size()));
      return Value(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      KEEL_TRY(ctx.charge(16 * (a.as_list().size() + b.as_list().size())));
      Value::List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
      return repeat(a, b.as_int(), ctx);
    }
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) {
      return repeat(b, a.as_int(), ctx);
    }
  }
  if (op == "%" && a.is_string()) {
    return Status::unsupported("printf-style string formatting ('%') is not supported");
  }
  return type_error(op, a, b);
}

Result<bool> contains(const Value& haystack, const Value& needle) {
  switch (haystack.kind()) {
    case ValueKind::kUndefined:
      return false;
    case ValueKind::kString:
      if (!needle.is_string()) {
        return Status::invalid_argument("'in <string>' requires string as left operand, not " +
                                        std::string(needle.type_name()));
      }
      return haystack.as_string().find(needle.as_string()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& item : haystack.as_list()) {
        if (values_equal(item, needle)) return true;
      }
      return false;
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      return needle.is_string() && haystack.as_dict().find(needle.as_string()) != nullptr;
    default:
      return Status::invalid_argument("argument of type '" + std::string(haystack.type_name()) +
                                      "' is not iterable");
  }
}

}  // namespace keel::jinja
