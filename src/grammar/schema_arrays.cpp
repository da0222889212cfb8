// Array keywords → GBNF (schema_compiler.h's array_expr): items, prefixItems (2020-12) or
// array-valued items with additionalItems (draft 4-7), minItems, maxItems. Item i < k follows
// prefix schema i, later items the rest schema (any value when absent, none when false).
// uniqueItems is honoured only where it holds trivially (at most one item); otherwise refused.
#include <fmt/format.h>

#include "grammar/schema_compiler.h"

namespace keel::grammar {

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
    return unsupported("uniqueItems", "a grammar cannot keep more than one item distinct");
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
