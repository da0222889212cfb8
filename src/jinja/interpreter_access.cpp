// Interpreter: attribute access, subscripts and slices with Jinja2's rules: `a.b` tries
// methods, then keys (dicts); `a[b]` tries keys or indices, then methods; a missing key, index
// or attribute is undefined; any access on an undefined value is an error.
#include "jinja/interpreter.h"
#include "jinja/plain_spans.h"
#include "jinja/py_string.h"

namespace keel::jinja {
namespace {

Status undefined_access_error(const Value& v) {
  const std::string& name = v.undefined_name();
  return Status::invalid_argument(name.empty() ? "value is undefined"
                                               : "'" + name + "' is undefined");
}

}  // namespace

Result<Value> Interpreter::eval_slice(const Expr& e) {
  KEEL_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0]));
  std::optional<int64_t> parts[3];
  for (int i = 0; i < 3; ++i) {
    const ExprPtr& child = e.children[static_cast<size_t>(i) + 1];
    if (!child) continue;
    KEEL_ASSIGN_OR_RETURN(Value v, eval(*child));
    if (v.is_none()) continue;
    if (!v.is_int() && !v.is_bool()) {
      return Status::invalid_argument("slice indices must be integers or none, not " +
                                      std::string(v.type_name()));
    }
    parts[i] = v.as_int();
  }
  if (obj.is_undefined()) return undefined_access_error(obj);
  if (obj.is_list()) {
    const Value::List& list = obj.as_list();
    KEEL_ASSIGN_OR_RETURN(auto idx, slice_indices(list.size(), parts[0], parts[1], parts[2]));
    KEEL_TRY(ctx_.charge(16 * idx.size()));
    Value::List out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(list[i]);
    return Value(std::move(out));
  }
  if (obj.is_string()) {
    const std::string& s = obj.as_string();
    std::vector<size_t> offsets = codepoint_offsets(s);
    KEEL_ASSIGN_OR_RETURN(auto idx,
                          slice_indices(offsets.size() - 1, parts[0], parts[1], parts[2]));
    Value out = pick_chars_tracked(obj, offsets, idx);  // each character keeps its origin
    KEEL_TRY(ctx_.charge(out.as_string().size()));
    return out;
  }
  return Status::invalid_argument("'" + std::string(obj.type_name()) + "' object is not sliceable");
}

Result<Value> Interpreter::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case ValueKind::kUndefined:
      return undefined_access_error(obj);
    case ValueKind::kDict:
    case ValueKind::kString:
    case ValueKind::kList: {
      Value method = get_method(obj, name, &ctx_);
      if (!method.is_undefined() || !obj.is_dict()) return method;
      const Value* v = obj.as_dict().find(name);
      return v ? *v : Value::undefined(name);
    }
    case ValueKind::kNamespace: {
      const Value* v = obj.as_dict().find(name);
      return v ? *v : Value::undefined(name);
    }
    default:
      return Value::undefined(name);
  }
}

Result<Value> Interpreter::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case ValueKind::kUndefined:
      return undefined_access_error(obj);
    case ValueKind::kDict:
    case ValueKind::kNamespace:
      if (key.is_string()) {
        const Value* v = obj.as_dict().find(key.as_string());
        if (v) return *v;
        if (obj.is_dict()) {
          Value method = get_method(obj, key.as_string(), &ctx_);
          if (!method.is_undefined()) return method;
        }
        return Value::undefined(key.as_string());
      }
      return Value::undefined(key.to_str());
    case ValueKind::kList:
    case ValueKind::kString: {
      if (key.is_string()) return get_method(obj, key.as_string(), &ctx_);
      if (!key.is_int() && !key.is_bool()) return Value::undefined(key.to_str());
      int64_t i = key.as_int();
      if (obj.is_list()) {
        const auto n = static_cast<int64_t>(obj.as_list().size());
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
        return obj.as_list()[static_cast<size_t>(i)];
      }
      const std::string& s = obj.as_string();
      std::vector<size_t> offsets = codepoint_offsets(s);
      const auto n = static_cast<int64_t>(offsets.size() - 1);
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("index " + std::to_string(key.as_int()));
      return pick_chars_tracked(obj, offsets, {static_cast<size_t>(i)});
    }
    default:
      return Value::undefined(key.to_str());
  }
}

}  // namespace keel::jinja
