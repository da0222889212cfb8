// allOf merging and oneOf disjointness (schema_merge.h).
#include "grammar/schema_merge.h"

#include <fmt/format.h>

#include <set>
#include <vector>

#include "grammar/decimal.h"
#include "grammar/regex.h"

namespace keel::grammar {
namespace {

constexpr int kMaxDepth = 32;

const std::set<std::string_view> kKnown = {"type",
                                           "enum",
                                           "const",
                                           "multipleOf",
                                           "maximum",
                                           "exclusiveMaximum",
                                           "minimum",
                                           "exclusiveMinimum",
                                           "maxLength",
                                           "minLength",
                                           "pattern",
                                           "format",
                                           "maxItems",
                                           "minItems",
                                           "uniqueItems",
                                           "maxContains",
                                           "minContains",
                                           "contains",
                                           "maxProperties",
                                           "minProperties",
                                           "required",
                                           "dependentRequired",
                                           "dependencies",
                                           "dependentSchemas",
                                           "properties",
                                           "patternProperties",
                                           "additionalProperties",
                                           "propertyNames",
                                           "items",
                                           "prefixItems",
                                           "additionalItems",
                                           "unevaluatedItems",
                                           "unevaluatedProperties",
                                           "allOf",
                                           "anyOf",
                                           "oneOf",
                                           "not",
                                           "if",
                                           "then",
                                           "else",
                                           "$ref",
                                           "$dynamicRef",
                                           "$recursiveRef",
                                           "$defs",
                                           "definitions",
                                           "nullable",
                                           "contentSchema"};

Status merge_error(std::string_view key, std::string_view why) {
  return Status::invalid_argument(
      fmt::format("JSON Schema keyword `allOf` is not supported here: {} (`{}`)", why, key));
}

bool has_constraints(const SchemaJson& s) {
  for (const auto& [k, v] : s.items()) {
    if (!is_annotation(k) && k != "$defs" && k != "definitions") return true;
  }
  return false;
}

SchemaJson without(const SchemaJson& s, std::string_view key) {
  SchemaJson out = SchemaJson::object();
  for (const auto& [k, v] : s.items()) {
    if (k != key) out[k] = v;
  }
  return out;
}

Result<SchemaJson> deref_at(const SchemaCompiler& c, const SchemaJson& s, int depth);
Result<SchemaJson> merge_at(const SchemaCompiler& c, const SchemaJson& s, int depth);

std::set<std::string> types_of(const SchemaJson& s) {
  std::set<std::string> out;
  if (s.contains("type")) {
    const SchemaJson& t = s["type"];
    if (t.is_string()) out.insert(t.get<std::string>());
    if (t.is_array()) {
      for (const SchemaJson& x : t) {
        if (x.is_string()) out.insert(x.get<std::string>());
      }
    }
  }
  return out;
}

// "allOf" of two sub-schemas, flattened when one is trivially true.
SchemaJson both(const SchemaJson& a, const SchemaJson& b) {
  auto trivial = [](const SchemaJson& x) {
    return (x.is_boolean() && x.get<bool>()) || (x.is_object() && x.empty());
  };
  if (trivial(a)) return b;
  if (trivial(b) || a == b) return a;
  return SchemaJson{{"allOf", SchemaJson::array({a, b})}};
}

// The schema `s` applies to a property `name` it does not declare (true when unconstrained).
SchemaJson applies_to(const SchemaJson& s, const std::string& name) {
  if (s.contains("properties") && s["properties"].contains(name)) return s["properties"][name];
  if (s.contains("patternProperties")) {
    for (const auto& [re, sub] : s["patternProperties"].items()) {
      if (regex_search(re, name).value_or(false)) return sub;
    }
  }
  if (s.contains("additionalProperties")) return s["additionalProperties"];
  return SchemaJson(true);
}

Status merge_objects(const SchemaJson& a, const SchemaJson& b, SchemaJson* out) {
  const bool pa = a.contains("patternProperties"), pb = b.contains("patternProperties");
  if (pa && pb && a["patternProperties"] != b["patternProperties"]) {
    return merge_error("patternProperties", "two parts have different patternProperties");
  }
  if ((pa && b.contains("additionalProperties")) || (pb && a.contains("additionalProperties"))) {
    return merge_error("patternProperties",
                       "patternProperties in one part, additionalProperties in another");
  }
  std::vector<std::string> names;
  for (const SchemaJson* s : {&a, &b}) {
    if (!s->contains("properties")) continue;
    for (const auto& [k, v] : (*s)["properties"].items()) {
      if (std::find(names.begin(), names.end(), k) == names.end()) names.push_back(k);
    }
  }
  SchemaJson required = SchemaJson::array();
  for (const SchemaJson* s : {&a, &b}) {
    if (!s->contains("required")) continue;
    for (const SchemaJson& r : (*s)["required"]) {
      if (std::find(required.begin(), required.end(), r) == required.end()) required.push_back(r);
    }
  }
  SchemaJson props = SchemaJson::object();
  for (const std::string& n : names) {
    const SchemaJson va = applies_to(a, n), vb = applies_to(b, n);
    if ((va.is_boolean() && !va.get<bool>()) || (vb.is_boolean() && !vb.get<bool>())) {
      if (std::find(required.begin(), required.end(), n) != required.end()) {
        return merge_error("required", fmt::format("property `{}` is required by one part and "
                                                   "not allowed by another",
                                                   n));
      }
      continue;
    }
    props[n] = both(va, vb);
  }
  if (!names.empty()) (*out)["properties"] = props;
  if (!required.empty()) (*out)["required"] = required;
  const bool aa = a.contains("additionalProperties"), ab = b.contains("additionalProperties");
  if (aa || ab) {
    const SchemaJson x = aa ? a["additionalProperties"] : SchemaJson(true);
    const SchemaJson y = ab ? b["additionalProperties"] : SchemaJson(true);
    if ((x.is_boolean() && !x.get<bool>()) || (y.is_boolean() && !y.get<bool>())) {
      (*out)["additionalProperties"] = false;
    } else {
      (*out)["additionalProperties"] = both(x, y);
    }
  }
  if (pa || pb) (*out)["patternProperties"] = pa ? a["patternProperties"] : b["patternProperties"];
  return Status();
}

Result<SchemaJson> intersect_types(const SchemaJson& a, const SchemaJson& b) {
  std::set<std::string> ta = types_of(a), tb = types_of(b);
  SchemaJson out = SchemaJson::array();
  for (const std::string& t : ta) {
    if (tb.count(t) != 0) {
      out.push_back(t);
    } else if (t == "integer" && tb.count("number") != 0) {
      out.push_back("integer");
    } else if (t == "number" && tb.count("integer") != 0) {
      out.push_back("integer");
    }
  }
  if (out.empty()) return merge_error("type", "the parts' types do not intersect");
  if (out.size() == 1) return out[0];
  return out;
}

// The values `s` allows by const/enum (nullopt: not restricted).
std::optional<std::vector<SchemaJson>> value_set(const SchemaJson& s) {
  if (s.contains("const")) return std::vector<SchemaJson>{s["const"]};
  if (s.contains("enum") && s["enum"].is_array()) {
    return std::vector<SchemaJson>(s["enum"].begin(), s["enum"].end());
  }
  return std::nullopt;
}

Status merge_values(const SchemaJson& a, const SchemaJson& b, SchemaJson* out) {
  auto va = value_set(a), vb = value_set(b);
  if (!va || !vb) return Status();
  SchemaJson keep = SchemaJson::array();
  for (const SchemaJson& v : *va) {
    if (std::find(vb->begin(), vb->end(), v) != vb->end()) keep.push_back(v);
  }
  if (keep.empty()) return merge_error("enum", "the parts' enum/const values do not intersect");
  out->erase("const");
  out->erase("enum");
  (*out)["enum"] = keep;
  return Status();
}

Result<SchemaJson> merge_number(const std::string& key, const SchemaJson& va,
                                const SchemaJson& vb) {
  if (!va.is_number() || !vb.is_number()) {
    return merge_error(key, "the parts give it different non-numeric values");
  }
  const Decimal da = *Decimal::parse(va.dump()), db = *Decimal::parse(vb.dump());
  const int c = compare(da, db);
  if (key == "multipleOf") {
    // The larger must be a multiple of the smaller: (larger / smaller) exact integer.
    const Decimal& big = c >= 0 ? da : db;
    const Decimal& small = c >= 0 ? db : da;
    const int32_t shift = std::max(big.scale(), small.scale());
    const int64_t nb = big.floor_scaled(shift, INT64_MAX / 2);
    const int64_t ns = small.floor_scaled(shift, INT64_MAX / 2);
    if (ns == 0 || nb % ns != 0 || nb >= INT64_MAX / 2) {
      return merge_error(key, "the parts' multipleOf values are not multiples of each other");
    }
    return c >= 0 ? va : vb;
  }
  const bool take_larger = key.rfind("min", 0) == 0 || key == "exclusiveMinimum";
  return (c >= 0) == take_larger ? va : vb;
}

Result<SchemaJson> merge_two(const SchemaJson& a, const SchemaJson& b) {
  static const std::set<std::string_view> kObjectKeys = {"properties", "additionalProperties",
                                                         "patternProperties", "required"};
  static const std::set<std::string_view> kNumeric = {
      "minimum",   "maximum",  "exclusiveMinimum", "exclusiveMaximum", "multipleOf",   "minLength",
      "maxLength", "minItems", "maxItems",         "minProperties",    "maxProperties"};
  SchemaJson out = SchemaJson::object();
  for (const auto& [k, v] : a.items()) {
    if (kObjectKeys.count(k) == 0) out[k] = v;
  }
  for (const auto& [k, vb] : b.items()) {
    if (kObjectKeys.count(k) != 0 || k == "const" || k == "enum") continue;
    if (!out.contains(k) || out[k] == vb) {
      if (!out.contains(k)) out[k] = vb;
      continue;
    }
    const SchemaJson va = out[k];
    if (is_annotation(k) || k == "$defs" || k == "definitions") continue;
    if (k == "type") {
      KEEL_ASSIGN_OR_RETURN(out[k], intersect_types(a, b));
    } else if (kNumeric.count(k) != 0) {
      KEEL_ASSIGN_OR_RETURN(out[k], merge_number(k, va, vb));
    } else if (k == "items" && va.is_object() && vb.is_object()) {
      out[k] = both(va, vb);
    } else if (k == "propertyNames" || k == "additionalItems") {
      out[k] = both(va, vb);
    } else if (k == "uniqueItems" || k == "nullable") {
      out[k] = k == "uniqueItems" ? (va == true || vb == true) : (va == true && vb == true);
    } else {
      return merge_error(k, "two parts give it different values");
    }
  }
  if (!a.contains("const") && !a.contains("enum")) {
    for (const char* k : {"const", "enum"}) {
      if (b.contains(k)) out[k] = b[k];
    }
  }
  if (Status st = merge_values(a, b, &out); !st.ok()) return st;
  if (Status st = merge_objects(a, b, &out); !st.ok()) return st;
  return out;
}

Result<SchemaJson> deref_at(const SchemaCompiler& c, const SchemaJson& s, int depth) {
  if (depth > kMaxDepth) {
    return Status::invalid_argument(
        fmt::format("JSON Schema `$ref` / `allOf` chain deeper than {} (a cycle?)", kMaxDepth));
  }
  if (s.is_boolean()) {
    if (s.get<bool>()) return SchemaJson::object();
    return Status::invalid_argument("schema `false` matches nothing");
  }
  if (!s.is_object()) return Status::invalid_argument("a schema must be an object or a boolean");
  SchemaJson out = s;
  if (s.contains("$ref")) {
    if (!s["$ref"].is_string()) return Status::invalid_argument("`$ref` must be a string");
    KEEL_ASSIGN_OR_RETURN(const SchemaJson* target, c.resolve(s["$ref"].get<std::string>()));
    KEEL_ASSIGN_OR_RETURN(SchemaJson t, deref_at(c, *target, depth + 1));
    const SchemaJson rest = without(s, "$ref");
    out = t;
    if (has_constraints(rest)) {
      KEEL_ASSIGN_OR_RETURN(out, merge_two(t, rest));
    }
  }
  if (out.contains("allOf")) return merge_at(c, out, depth + 1);
  return out;
}

Result<SchemaJson> merge_at(const SchemaCompiler& c, const SchemaJson& s, int depth) {
  const SchemaJson& parts = s["allOf"];
  if (!parts.is_array() || parts.empty()) {
    return Status::invalid_argument("`allOf` must be a non-empty array");
  }
  SchemaJson out = SchemaJson::object();
  const SchemaJson rest = without(s, "allOf");
  std::vector<const SchemaJson*> all;
  for (const SchemaJson& p : parts) all.push_back(&p);
  if (has_constraints(rest)) all.push_back(&rest);
  bool any_of_seen = false;
  for (const SchemaJson* p : all) {
    KEEL_ASSIGN_OR_RETURN(SchemaJson d, deref_at(c, *p, depth + 1));
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!d.contains(k)) continue;
      if (any_of_seen) return merge_error(k, "two parts have anyOf/oneOf");
      any_of_seen = true;
    }
    KEEL_ASSIGN_OR_RETURN(out, merge_two(out, d));
  }
  for (const auto& [k, v] : rest.items()) {
    if (is_annotation(k) && !out.contains(k)) out[k] = v;
  }
  return out;
}

bool value_disjoint(const SchemaJson& a, const SchemaJson& b) {
  auto va = value_set(a), vb = value_set(b);
  if (!va || !vb) return false;
  for (const SchemaJson& v : *va) {
    if (std::find(vb->begin(), vb->end(), v) != vb->end()) return false;
  }
  return true;
}

std::string type_of_value(const SchemaJson& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "boolean";
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  const double d = v.get<double>();
  return d == static_cast<double>(static_cast<int64_t>(d)) ? "integer" : "number";
}

// The value kinds `s` admits ("integer" for integral numbers); empty = any.
std::set<std::string> kinds(const SchemaJson& s) {
  std::set<std::string> out;
  if (auto vs = value_set(s)) {
    for (const SchemaJson& v : *vs) out.insert(type_of_value(v));
    return out;
  }
  for (const std::string& t : types_of(s)) {
    out.insert(t);
    if (t == "number") out.insert("integer");
  }
  return out;
}

bool disjoint_at(const SchemaCompiler& c, const SchemaJson& a0, const SchemaJson& b0, int depth) {
  if (depth > 8) return false;
  Result<SchemaJson> ra = deref_at(c, a0, 0), rb = deref_at(c, b0, 0);
  if (!ra.ok() || !rb.ok()) return false;
  const SchemaJson &a = *ra, &b = *rb;
  const std::set<std::string> ka = kinds(a), kb = kinds(b);
  if (!ka.empty() && !kb.empty()) {
    bool overlap = false;
    for (const std::string& k : ka) overlap = overlap || kb.count(k) != 0;
    if (!overlap) return true;
  }
  if (value_disjoint(a, b)) return true;
  if (ka != std::set<std::string>{"object"} || kb != std::set<std::string>{"object"}) return false;
  auto required = [](const SchemaJson& s) {
    std::set<std::string> r;
    if (s.contains("required")) {
      for (const SchemaJson& x : s["required"]) {
        if (x.is_string()) r.insert(x.get<std::string>());
      }
    }
    return r;
  };
  const std::set<std::string> ra_set = required(a), rb_set = required(b);
  for (const std::string& p : ra_set) {
    const SchemaJson pb = applies_to(b, p);
    if (pb.is_boolean() && !pb.get<bool>()) return true;
    if (rb_set.count(p) != 0 && disjoint_at(c, applies_to(a, p), pb, depth + 1)) return true;
  }
  for (const std::string& p : rb_set) {
    const SchemaJson pa = applies_to(a, p);
    if (pa.is_boolean() && !pa.get<bool>()) return true;
  }
  return false;
}

}  // namespace

bool is_annotation(std::string_view key) { return kKnown.count(key) == 0; }

Result<SchemaJson> merge_all_of(const SchemaCompiler& c, const SchemaJson& s) {
  return merge_at(c, s, 0);
}

Result<SchemaJson> deref(const SchemaCompiler& c, const SchemaJson& s) { return deref_at(c, s, 0); }

bool provably_disjoint(const SchemaCompiler& c, const SchemaJson& a, const SchemaJson& b) {
  return disjoint_at(c, a, b, 0);
}

}  // namespace keel::grammar
