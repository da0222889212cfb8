// Value: the dynamic values of the Jinja2-subset interpreter, with Python semantics where chat
// templates rely on them: undefined, none, bool, int (64-bit, overflow is an error), float,
// str (UTF-8; lengths, indices and slices count code points), list (tuples are lists), dict
// (string keys, insertion order kept), namespace (the one mutable object) and callables.
// Strings, lists and dicts are shared on copy, so copying a Value is O(1).
//
// A string may carry plain spans (jinja/text_span.h): the byte ranges that came from
// untrusted input (message contents). Value(std::string) has none; Value::plain() marks all of
// a string; with_spans() any part. How spans travel through a render: plain_spans.h.
//
// Invariants: lists and dicts are shared and never mutated once built (templates run as in
// Jinja's immutable sandbox); only a namespace's attributes change, through `set ns.x = ...`.
// Thread safety: a Value graph belongs to one render; nothing is shared between renders.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/result.h"
#include "jinja/text_span.h"

namespace keel::jinja {

class Value;

// The arguments of a call: positional first, then keyword arguments in source order.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

// A string-keyed dictionary that keeps insertion order (Python 3.7+ dict).
struct Dict {
  std::vector<std::pair<std::string, Value>> entries;

  [[nodiscard]] const Value* find(std::string_view key) const;
  // Replaces the value of an existing key in place, else appends.
  void set(std::string key, Value value);
};

// A function value: a global (range, namespace, ...), a bound method ("abc".upper) or a macro.
struct Callable {
  std::string name;  // for error messages
  std::function<Result<Value>(CallArgs& args)> fn;
};

enum class ValueKind {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable,
};

class Value {
 public:
  struct Undefined {
    std::string name;  // what was looked up, for "'x' is undefined" messages
  };
  using List = std::vector<Value>;

  Value() : data_(Undefined{}) {}  // undefined
  static Value undefined(std::string name) { return Value(Data(Undefined{std::move(name)})); }
  static Value none() { return Value(Data(nullptr)); }
  Value(bool b) : data_(b) {}          // NOLINT(implicit)
  Value(int64_t i) : data_(i) {}       // NOLINT(implicit)
  Value(int i) : data_(int64_t{i}) {}  // NOLINT(implicit)
  Value(double d) : data_(d) {}        // NOLINT(implicit)
  Value(std::string s)                 // NOLINT(implicit)
      : data_(std::make_shared<const Str>(Str{std::move(s), {}})) {}
  Value(std::string_view s) : Value(std::string(s)) {}                           // NOLINT(implicit)
  Value(const char* s) : Value(std::string(s)) {}                                // NOLINT(implicit)
  Value(List items) : data_(std::make_shared<const List>(std::move(items))) {}   // NOLINT
  Value(Dict dict) : data_(DictRef{std::make_shared<Dict>(std::move(dict))}) {}  // NOLINT
  // A string whose bytes all came from untrusted input.
  static Value plain(std::string s);
  // A string whose `spans` (valid for it, see text_span.h) came from untrusted input.
  static Value with_spans(std::string s, TextSpans spans);
  static Value make_namespace(Dict attrs);
  static Value make_callable(std::string name, std::function<Result<Value>(CallArgs&)> fn);

  [[nodiscard]] ValueKind kind() const { return static_cast<ValueKind>(data_.index()); }
  [[nodiscard]] bool is_undefined() const { return kind() == ValueKind::kUndefined; }
  [[nodiscard]] bool is_none() const { return kind() == ValueKind::kNone; }
  [[nodiscard]] bool is_bool() const { return kind() == ValueKind::kBool; }
  [[nodiscard]] bool is_int() const { return kind() == ValueKind::kInt; }  // bools excluded
  [[nodiscard]] bool is_float() const { return kind() == ValueKind::kFloat; }
  [[nodiscard]] bool is_number() const { return is_int() || is_float() || is_bool(); }
  [[nodiscard]] bool is_string() const { return kind() == ValueKind::kString; }
  [[nodiscard]] bool is_list() const { return kind() == ValueKind::kList; }
  [[nodiscard]] bool is_dict() const { return kind() == ValueKind::kDict; }
  [[nodiscard]] bool is_namespace() const { return kind() == ValueKind::kNamespace; }
  [[nodiscard]] bool is_callable() const { return kind() == ValueKind::kCallable; }

  // Accessors; each KEEL_CHECKs the kind.
  [[nodiscard]] bool as_bool() const;
  [[nodiscard]] int64_t as_int() const;    // int or bool
  [[nodiscard]] double as_double() const;  // int, bool or float
  [[nodiscard]] const std::string& as_string() const;
  // The plain spans of a string (empty for other kinds and for markup-only strings).
  [[nodiscard]] const TextSpans& plain_spans() const;
  // Identifies a string's storage (shared by copies), for telling a passed-through string from a
  // new one; nullptr for other kinds.
  [[nodiscard]] const void* string_identity() const;
  [[nodiscard]] const List& as_list() const;
  [[nodiscard]] const Dict& as_dict() const;  // dict or namespace
  [[nodiscard]] Dict& namespace_attrs() const;
  [[nodiscard]] const Callable& as_callable() const;
  [[nodiscard]] const std::string& undefined_name() const;

  // Python truthiness: undefined, none, false, 0, 0.0, "", [] and {} are false.
  [[nodiscard]] bool truthy() const;
  // Python str(): None -> "None", True -> "True", 1.0 -> "1.0", lists and dicts as repr();
  // undefined -> "".
  [[nodiscard]] std::string to_str() const;
  // Python repr(): strings quoted.
  [[nodiscard]] std::string repr() const;
  // Python type name for error messages ("str", "int", "list", "dict", "NoneType", ...).
  [[nodiscard]] std::string_view type_name() const;

 private:
  struct DictRef {
    std::shared_ptr<Dict> dict;
  };
  struct NamespaceRef {
    std::shared_ptr<Dict> attrs;
  };
  struct Str {
    std::string text;
    TextSpans plain;
  };
  // Alternative order must match ValueKind.
  using Data = std::variant<Undefined, std::nullptr_t, bool, int64_t, double,
                            std::shared_ptr<const Str>, std::shared_ptr<const List>, DictRef,
                            NamespaceRef, std::shared_ptr<const Callable>>;
  explicit Value(Data data) : data_(std::move(data)) {}

  Data data_;
};

// Python ==: numbers compare by value (True == 1), lists and dicts deeply, undefined equals only
// undefined; values of different kinds are unequal.
bool values_equal(const Value& a, const Value& b);
// Python <: numbers, strings (by code point) and lists (lexicographically); anything else is an
// InvalidArgument naming both types. Returns -1, 0 or 1.
Result<int> compare_values(const Value& a, const Value& b);

// True when `v` nests lists/dicts/namespaces more than `max_depth` levels deep (a scalar is at
// depth 0). Stops descending past max_depth, so it is safe on any value.
bool exceeds_depth(const Value& v, int max_depth);

// The items of an iterable as for loops and filters walk them: list elements, dict keys, string
// characters (code points); undefined is empty. Anything else is InvalidArgument "'T' object is not
// iterable", prefixed with "fn: " when `fn` is given.
Result<Value::List> iterable_items(const Value& v, std::string_view fn = "");

// True when `v` holds a namespace or a callable anywhere inside (lists and dicts are searched;
// callables are not looked into). Namespace attributes may hold neither, which keeps the value
// graph acyclic (namespaces are the only mutable objects), so reference counting frees it all.
bool holds_reference(const Value& v);

// Float formatting as Python's repr(float): shortest round-trip digits, "1.0", "1e+16", "nan".
std::string format_python_float(double d);

}  // namespace keel::jinja
