// Array keywords → GBNF (schema_compiler.h's array_expr): items, prefixItems (2020-12) or
// array-valued items with additionalItems (draft 4-7), minItems, maxItems. Item i < k follows
// prefix schema i, later items the rest schema (any value when absent, none when false).
// uniqueItems holds trivially for at most one item; for items from a finite set of values
// (enum / const, boolean, null — sets of enums in pydantic and zod) the array is a subsequence of
// the values in their listed order; otherwise it is refused (a grammar cannot keep open-ended
// items distinct).
#include <fmt/format.h>

#include "grammar/schema_compiler.h"
#include "grammar/schema_merge.h"

namespace keel::grammar {
namespace {

constexpr size_t kMaxUniqueValues = 64;

// The values a finite item schema allows, in order (nullopt: not finite).
std::optional<std::vector<SchemaJson>> finite_values(const SchemaCompiler& c,
                                                     const SchemaJson& item) {
  Result<SchemaJson> d = deref(c, item);
  if (!d.ok()) return std::nullopt;
  const SchemaJson& s = *d;
  std::vector<SchemaJson> out;
  if (s.contains("const")) {
    out.push_back(s["const"]);
  } else if (s.contains("enum") && s["enum"].is_array()) {
    for (const SchemaJson& v : s["enum"]) {
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  } else if (s.contains("type") && s["type"] == "boolean") {
    out = {false, true};
  } else if (s.contains("type") && s["type"] == "null") {
    out = {nullptr};
  } else {
    return std::nullopt;
  }
  if (s.contains("type") && s["type"].is_string()) {  // values of another type are not valid
    const std::string t = s["type"].get<std::string>();
    std::erase_if(out, [&](const SchemaJson& v) {
      return !((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) ||
               (t == "null" && v.is_null()) || (t == "number" && v.is_number()) ||
               (t == "integer" && (v.is_number_integer() || v.is_number_unsigned())) ||
               (t == "object" && v.is_object()) || (t == "array" && v.is_array()));
    });
  }
  if (out.empty() || out.size() > kMaxUniqueValues) return std::nullopt;
  return out;
}

// Distinct items: a subsequence of `values` of min..max entries.
Result<std::string> unique_subsequence(SchemaCompiler& c, const std::vector<SchemaJson>& values,
                                       int64_t min, int64_t max) {
  RuleWriter& w = c.writer();
  const int64_t n = static_cast<int64_t>(values.size());
  if (max < 0 || max > n) max = n;
  if (min > max) return unsupported("uniqueItems", "more items than distinct values allowed");
  const std::string base = w.fresh("set");
  // at(i, k): values from i on, k written so far.
  std::vector<std::vector<std::string>> names(
      static_cast<size_t>(n + 1), std::vector<std::string>(static_cast<size_t>(max + 1)));
  for (int64_t i = n; i >= 0; --i) {
    for (int64_t k = max; k >= 0; --k) {
      if (k + (n - i) < min) continue;  // cannot reach min: no rule
      std::string alts;
      if (i == n) {
        alts = "\"\"";
      } else {
        const std::string lit = gbnf_literal(values[static_cast<size_t>(i)].dump());
        const std::string& take =
            k < max ? names[static_cast<size_t>(i + 1)][static_cast<size_t>(k + 1)] : "";
        if (!take.empty()) alts = fmt::format("{}{} ws {}", k > 0 ? "\",\" ws " : "", lit, take);
        const std::string& skip = names[static_cast<size_t>(i + 1)][static_cast<size_t>(k)];
        if (!skip.empty()) alts += (alts.empty() ? "" : " | ") + skip;
        if (alts.empty()) continue;
      }
      const std::string name = fmt::format("{}-{}-{}", base, i, k);
      w.define(name, alts);
      names[static_cast<size_t>(i)][static_cast<size_t>(k)] = name;
    }
  }
  if (names[0][0].empty()) return unsupported("uniqueItems", "no array satisfies the item counts");
  return w.add("arr", fmt::format("\"[\" ws {} \"]\"", names[0][0]));
}

}  // namespace

Result<std::string> array_expr(SchemaCompiler& c, const SchemaJson& s) {
  const SchemaJson* prefix = nullptr;
  const SchemaJson* rest = nullptr;  // nullptr: any value
  if (s.contains("prefixItems")) {
    prefix = &s["prefixItems"];
    if (s.contains("items")) rest = &s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix = &s["items"];
    if (s.contains("additionalItems")) rest = &s["additionalItems"];
  } else if (s.contains("items")) {
    rest = &s["items"];
  }
  if (prefix != nullptr && !prefix->is_array()) {
    return Status::invalid_argument("`prefixItems` must be an array of schemas");
  }
  const int64_t k = prefix != nullptr ? static_cast<int64_t>(prefix->size()) : 0;
  const bool no_rest = rest != nullptr && rest->is_boolean() && !rest->get<bool>();
  KEEL_ASSIGN_OR_RETURN(int64_t min, count_keyword(s, "minItems", 0));
  KEEL_ASSIGN_OR_RETURN(int64_t max, count_keyword(s, "maxItems", -1));
  if (no_rest && (max < 0 || max > k)) max = k;
  if (max >= 0 && max < min) {
    return Status::invalid_argument(no_rest ? "`minItems` above the number of allowed items"
                                            : "`maxItems` below `minItems`");
  }
  if (s.contains("uniqueItems") && s["uniqueItems"] == true && (max < 0 || max > 1)) {
    std::optional<std::vector<SchemaJson>> values;
    if (k == 0 && rest != nullptr && !no_rest) values = finite_values(c, *rest);
    if (!values) {
      return unsupported("uniqueItems",
                         "a grammar cannot keep items distinct unless they come from a finite "
                         "set of values (enum, const, boolean)");
    }
    return unique_subsequence(c, *values, min, max);
  }
  std::string item = "json-value";
  if (rest != nullptr && !no_rest) {
    KEEL_ASSIGN_OR_RETURN(item, c.expr(*rest, "item"));
  }
  RuleWriter& w = c.writer();
  if (max == 0) return w.add("arr", "\"[\" ws \"]\"");
  // The items after the prefix: `more` repeated.
  const std::string more = fmt::format("(\",\" ws {} ws)", item);
  std::string tail;
  if (!no_rest && (max < 0 || max > k)) {
    const int64_t lo = std::max<int64_t>(0, min - std::max<int64_t>(k, 1));
    const std::string hi = max < 0 ? "" : std::to_string(max - std::max<int64_t>(k, 1));
    tail = fmt::format("{}{{{},{}}}", more, lo, hi);
  }
  if (k == 0) {
    const std::string body = fmt::format("{} ws {}", item, tail);
    return w.add("arr", fmt::format("\"[\" ws {} \"]\"", min == 0 ? "(" + body + ")?" : body));
  }
  std::vector<std::string> elems;
  for (const SchemaJson& p : *prefix) {
    KEEL_ASSIGN_OR_RETURN(std::string e, c.expr(p, "item"));
    elems.push_back(std::move(e));
  }
  // after_i: i items written (1 ≤ i ≤ k); the next is prefix item i, or (i = k) the tail.
  std::string next = tail;
  for (int64_t i = k - 1; i >= 1; --i) {
    std::string alts;
    if (max < 0 || i < max) {
      alts = fmt::format("\",\" ws {} ws {}", elems[static_cast<size_t>(i)], next);
    }
    if (i >= min) alts += alts.empty() ? "\"\"" : " | \"\"";
    next = w.add("tup", alts);
  }
  const std::string body = fmt::format("{} ws {}", elems[0], next);
  return w.add("arr", fmt::format("\"[\" ws {} \"]\"", min == 0 ? "(" + body + ")?" : body));
}

}  // namespace keel::grammar
