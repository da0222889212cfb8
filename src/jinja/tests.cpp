// Jinja tests (`x is defined`, `x is equalto 3`, ...), the argument binder and the context's
// work accounting.
#include "jinja/builtin_args.h"
#include "jinja/builtins.h"
#include "jinja/interpreter.h"

namespace keel::jinja {

Status BuiltinContext::charge(uint64_t units) {
  if (units > max_work || work_used > max_work - units) {
    work_used = max_work;
    return Status::resource_exhausted("template work budget of " + std::to_string(max_work) +
                                      " bytes exhausted");
  }
  work_used += units;
  return Status();
}

Result<ArgBinder> ArgBinder::bind(std::string_view fn, const CallArgs& args,
                                  std::vector<std::string_view> params) {
  ArgBinder b;
  b.fn_ = std::string(fn);
  b.params_ = std::move(params);
  b.bound_.resize(b.params_.size());
  if (args.positional.size() > b.params_.size()) {
    return Status::invalid_argument(b.fn_ + ": takes at most " + std::to_string(b.params_.size()) +
                                    " arguments, got " + std::to_string(args.positional.size()));
  }
  for (size_t i = 0; i < args.positional.size(); ++i) b.bound_[i] = args.positional[i];
  for (const auto& [key, value] : args.named) {
    size_t i = 0;
    while (i < b.params_.size() && b.params_[i] != key) ++i;
    if (i == b.params_.size()) {
      return Status::invalid_argument(b.fn_ + ": unexpected keyword argument '" + key + "'");
    }
    if (b.bound_[i]) {
      return Status::invalid_argument(b.fn_ + ": argument '" + key + "' given twice");
    }
    b.bound_[i] = value;
  }
  return b;
}

Status ArgBinder::type_error(size_t i, std::string_view want) const {
  return Status::invalid_argument(fn_ + ": argument '" + std::string(params_[i]) + "' must be " +
                                  std::string(want) + ", not " +
                                  std::string(bound_[i]->type_name()));
}

Result<std::optional<std::string>> ArgBinder::opt_string(size_t i) const {
  const Value* v = get(i);
  if (v == nullptr || v->is_none()) return std::optional<std::string>();
  if (!v->is_string()) return type_error(i, "a string");
  return std::optional<std::string>(v->as_string());
}

Result<std::string> ArgBinder::string_or(size_t i, std::string fallback) const {
  const Value* v = get(i);
  if (v == nullptr) return fallback;
  if (!v->is_string()) return type_error(i, "a string");
  return v->as_string();
}

Result<std::optional<int64_t>> ArgBinder::opt_int(size_t i) const {
  const Value* v = get(i);
  if (v == nullptr || v->is_none()) return std::optional<int64_t>();
  if (!v->is_int() && !v->is_bool()) return type_error(i, "an integer");
  return std::optional<int64_t>(v->as_int());
}

Result<int64_t> ArgBinder::int_or(size_t i, int64_t fallback) const {
  KEEL_ASSIGN_OR_RETURN(std::optional<int64_t> v, opt_int(i));
  return v.value_or(fallback);
}

Value lookup_attribute_path(const Value& item, std::string_view path) {
  Value cur = item;
  size_t pos = 0;
  while (true) {
    size_t dot = path.find('.', pos);
    std::string part(
        path.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos));
    if (cur.is_dict() || cur.is_namespace()) {
      const Value* v = cur.as_dict().find(part);
      if (v == nullptr) return Value::undefined(part);
      cur = *v;
    } else if (cur.is_list() && !part.empty() &&
               part.find_first_not_of("0123456789") == std::string::npos && part.size() < 10) {
      size_t idx = std::stoul(part);
      if (idx >= cur.as_list().size()) return Value::undefined(part);
      cur = cur.as_list()[idx];
    } else {
      return Value::undefined(part);
    }
    if (dot == std::string_view::npos) return cur;
    pos = dot + 1;
  }
}

namespace {

Result<bool> compare_test(std::string_view name, const Value& a, const Value& b) {
  if (name == "eq" || name == "equalto" || name == "==") return values_equal(a, b);
  if (name == "ne" || name == "!=") return !values_equal(a, b);
  KEEL_ASSIGN_OR_RETURN(int c, compare_values(a, b));
  if (name == "lt" || name == "lessthan" || name == "<") return c < 0;
  if (name == "le" || name == "<=") return c <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return c > 0;
  return c >= 0;  // ge, >=
}

bool is_comparison(std::string_view n) {
  for (std::string_view c : {"eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
                             "<=", "gt", "greaterthan", ">", "ge", ">="}) {
    if (n == c) return true;
  }
  return false;
}

}  // namespace

Result<bool> apply_test(std::string_view name, const Value& value, CallArgs& args,
                        BuiltinContext& ctx) {
  (void)ctx;
  const std::string fn = "test '" + std::string(name) + "'";
  if (is_comparison(name) || name == "in" || name == "sameas" || name == "divisibleby") {
    KEEL_ASSIGN_OR_RETURN(ArgBinder b, ArgBinder::bind(fn, args, {"other"}));
    if (b.get(0) == nullptr) return Status::invalid_argument(fn + ": needs an argument");
    const Value& other = *b.get(0);
    if (name == "in") return contains(other, value);
    if (name == "sameas") {
      return value.kind() == other.kind() && values_equal(value, other);
    }
    if (name == "divisibleby") {
      if (!value.is_int() || !other.is_int() || other.as_int() == 0) {
        return Status::invalid_argument(fn + ": needs integers and a non-zero divisor");
      }
      return value.as_int() % other.as_int() == 0;
    }
    return compare_test(name, value, other);
  }
  if (!args.positional.empty() || !args.named.empty()) {
    return Status::invalid_argument(fn + ": takes no arguments");
  }
  if (name == "defined") return !value.is_undefined();
  if (name == "undefined") return value.is_undefined();
  if (name == "none") return value.is_none();
  if (name == "string") return value.is_string();
  if (name == "number") return value.is_number();
  if (name == "integer") return value.is_int();
  if (name == "float") return value.is_float();
  if (name == "boolean") return value.is_bool();
  if (name == "true") return value.is_bool() && value.as_bool();
  if (name == "false") return value.is_bool() && !value.as_bool();
  if (name == "mapping") return value.is_dict();
  if (name == "iterable") {
    return value.is_list() || value.is_dict() || value.is_string() || value.is_undefined();
  }
  if (name == "sequence") return value.is_list() || value.is_dict() || value.is_string();
  if (name == "callable") return value.is_callable();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!value.is_int()) return Status::invalid_argument(fn + ": needs an integer");
    return (value.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "lower" || name == "upper") {
    if (!value.is_string()) return false;
    const std::string& s = value.as_string();
    bool any = false;
    for (char c : s) {
      if ((name == "lower" && c >= 'A' && c <= 'Z') || (name == "upper" && c >= 'a' && c <= 'z')) {
        return false;
      }
      any = any || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }
    return any;
  }
  return Status::invalid_argument("unknown test '" + std::string(name) + "'");
}

}  // namespace keel::jinja
