// JSON Schema → GBNF (json_schema.h): SchemaCompiler's dispatch on a node's keywords, $ref rules,
// anyOf / oneOf / allOf, enum / const, and the shared primitives.
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <set>

#include "grammar/schema_compiler.h"
#include "grammar/schema_merge.h"
#include "grammar/schema_numbers.h"

namespace keel::grammar {
namespace {

constexpr std::string_view kPrimitives = R"(ws ::= " "?
json-char ::= [^"\\\x00-\x1F\x7F] | "\\" ["\\/bfnrt]
json-string ::= "\"" json-char* "\""
json-integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
json-number ::= json-integer ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?
json-boolean ::= "true" | "false"
json-null ::= "null"
json-value ::= json-object | json-array | json-string | json-number | json-boolean | json-null
json-object ::= "{" ws (json-member ("," ws json-member)*)? "}"
json-member ::= json-string ws ":" ws json-value ws
json-array ::= "[" ws (json-value ws ("," ws json-value ws)*)? "]"
)";

constexpr int kMaxDepth = 64;

// Validation keywords keel cannot honour: refused by name.
const std::set<std::string_view> kRefused = {"not",
                                             "if",
                                             "then",
                                             "else",
                                             "contains",
                                             "minContains",
                                             "maxContains",
                                             "dependentRequired",
                                             "dependencies",
                                             "dependentSchemas",
                                             "unevaluatedItems",
                                             "unevaluatedProperties",
                                             "$dynamicRef",
                                             "$recursiveRef",
                                             "contentSchema"};

const std::set<std::string_view> kObjectKeys = {
    "properties",    "required",      "additionalProperties", "patternProperties",
    "propertyNames", "minProperties", "maxProperties"};
const std::set<std::string_view> kArrayKeys = {"items",    "prefixItems", "additionalItems",
                                               "minItems", "maxItems",    "uniqueItems"};
const std::set<std::string_view> kStringKeys = {"minLength", "maxLength", "pattern", "format"};

bool has_any(const SchemaJson& s, const std::set<std::string_view>& keys) {
  for (const auto& [k, v] : s.items()) {
    if (keys.count(k) != 0) return true;
  }
  return false;
}

std::string join_alts(const std::vector<std::string>& alts) {
  std::string out;
  for (const std::string& a : alts) out += (out.empty() ? "" : " | ") + a;
  return alts.size() > 1 ? "(" + out + ")" : out;
}

// "~1" → "/", "~0" → "~", "%XX" → the byte.
std::string pointer_token(std::string_view t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '~' && i + 1 < t.size() && (t[i + 1] == '0' || t[i + 1] == '1')) {
      out += t[i + 1] == '0' ? '~' : '/';
      ++i;
    } else if (t[i] == '%' && i + 2 < t.size() && std::isxdigit(t[i + 1]) &&
               std::isxdigit(t[i + 2])) {
      out += static_cast<char>(std::stoi(std::string(t.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += t[i];
    }
  }
  return out;
}

}  // namespace

Status unsupported(std::string_view keyword, std::string_view why) {
  return Status::invalid_argument(fmt::format("JSON Schema keyword `{}` is not supported{}{}",
                                              keyword, why.empty() ? "" : ": ", why));
}

Result<int64_t> count_keyword(const SchemaJson& s, const char* key, int64_t dflt) {
  if (!s.contains(key)) return dflt;
  const SchemaJson& v = s[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 4096) {
    return Status::invalid_argument(fmt::format("`{}` must be an integer in [0, 4096]", key));
  }
  return v.get<int64_t>();
}

Result<std::string> SchemaCompiler::run(std::string_view top) {
  KEEL_ASSIGN_OR_RETURN(std::string e, expr(root_, "root"));
  return fmt::format("{} ::= {}\n", top, e) + writer_.text();
}

Result<const SchemaJson*> SchemaCompiler::resolve(const std::string& ref) const {
  auto fail = [&] {
    return Status::invalid_argument(fmt::format(
        "`$ref` \"{}\" is not supported (only local references: \"#\", \"#/$defs/NAME\", "
        "\"#/definitions/NAME\" or another JSON pointer into the schema)",
        ref));
  };
  if (ref.empty() || ref[0] != '#') return fail();
  const SchemaJson* at = &root_;
  size_t pos = 1;
  if (ref.size() > 1 && ref[1] != '/') return fail();
  while (pos < ref.size()) {
    const size_t next = ref.find('/', pos + 1);
    const std::string token = pointer_token(std::string_view(ref).substr(
        pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1));
    if (at->is_object() && at->contains(token)) {
      at = &(*at)[token];
    } else if (at->is_array() && !token.empty() && token.size() <= 9 &&
               token.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(token) < at->size()) {
      at = &(*at)[std::stoul(token)];
    } else {
      return fail();
    }
    pos = next == std::string::npos ? ref.size() : next;
  }
  return at;
}

Result<std::string> SchemaCompiler::expr(const SchemaJson& s, std::string_view hint) {
  if (depth_ >= kMaxDepth) {
    return Status::invalid_argument(fmt::format("JSON Schema nests deeper than {}", kMaxDepth));
  }
  ++depth_;
  Result<std::string> r = node(s, hint);
  --depth_;
  return r;
}

Result<std::string> SchemaCompiler::node(const SchemaJson& s, std::string_view hint) {
  if (s.is_boolean()) {
    if (s.get<bool>()) return std::string("json-value");
    return Status::invalid_argument("schema `false` matches nothing");
  }
  if (!s.is_object()) return Status::invalid_argument("a schema must be an object or a boolean");
  bool constrained = false;
  for (const auto& [key, value] : s.items()) {
    if (kRefused.count(key) != 0) return unsupported(key);
    if (!is_annotation(key) && key != "$defs" && key != "definitions") constrained = true;
  }
  if (!constrained) return std::string("json-value");
  if (s.contains("$ref")) {
    SchemaJson rest = s;
    rest.erase("$ref");
    for (const char* k : {"$defs", "definitions"}) rest.erase(k);
    bool siblings = false;
    for (const auto& [k, v] : rest.items()) siblings = siblings || !is_annotation(k);
    if (!siblings) return ref_rule(s);
  }
  if (s.contains("allOf") || s.contains("$ref")) {
    KEEL_ASSIGN_OR_RETURN(SchemaJson merged, deref(*this, s));
    return expr(keep(std::move(merged)), hint);
  }
  if (s.contains("nullable") && s["nullable"] == true) {
    SchemaJson rest = s;
    rest.erase("nullable");
    if (rest.contains("enum") && rest["enum"].is_array()) rest["enum"].push_back(nullptr);
    KEEL_ASSIGN_OR_RETURN(std::string e, expr(keep(std::move(rest)), hint));
    return fmt::format("({} | json-null)", e);
  }
  if (s.contains("anyOf")) return alternatives(s, "anyOf", hint);
  if (s.contains("oneOf")) return alternatives(s, "oneOf", hint);
  if (s.contains("const") || s.contains("enum")) return values(s);
  if (!s.contains("type")) {
    if (has_any(s, kObjectKeys)) return object_expr(*this, s);
    if (has_any(s, kArrayKeys)) return array_expr(*this, s);
    if (has_any(s, kStringKeys)) return string_expr(*this, s);
    if (has_numeric_keywords(s)) return number_expr(writer_, s, false);
    return std::string("json-value");
  }
  const SchemaJson& type = s["type"];
  if (type.is_string()) return typed(s, type.get<std::string>(), hint);
  if (!type.is_array() || type.empty()) {
    return Status::invalid_argument("`type` must be a string or a non-empty array of strings");
  }
  std::vector<std::string> alts;
  for (const SchemaJson& t : type) {
    if (!t.is_string()) return Status::invalid_argument("`type` entries must be strings");
    // "number" already generates the integers.
    if (t == "integer" && std::find(type.begin(), type.end(), "number") != type.end()) continue;
    KEEL_ASSIGN_OR_RETURN(std::string one, typed(s, t.get<std::string>(), hint));
    alts.push_back(std::move(one));
  }
  return join_alts(alts);
}

Result<std::string> SchemaCompiler::typed(const SchemaJson& s, std::string_view type,
                                          std::string_view hint) {
  (void)hint;
  if (type == "object") return object_expr(*this, s);
  if (type == "array") return array_expr(*this, s);
  if (type == "string") return string_expr(*this, s);
  if (type == "number") return number_expr(writer_, s, false);
  if (type == "integer") return number_expr(writer_, s, true);
  if (type == "boolean") return std::string("json-boolean");
  if (type == "null") return std::string("json-null");
  return Status::invalid_argument(fmt::format("JSON Schema type `{}` is not supported", type));
}

// const / enum: the values as literals, keeping those of the schema's `type` (if any).
Result<std::string> SchemaCompiler::values(const SchemaJson& s) {
  std::vector<SchemaJson> vals;
  if (s.contains("const")) {
    vals.push_back(s["const"]);
  } else {
    if (!s["enum"].is_array() || s["enum"].empty()) {
      return Status::invalid_argument("`enum` must be a non-empty array");
    }
    vals.assign(s["enum"].begin(), s["enum"].end());
  }
  std::vector<std::string> alts;
  for (const SchemaJson& v : vals) {
    if (s.contains("type")) {
      // A value outside `type` is not valid: leave it out.
      bool ok = false;
      const SchemaJson& t = s["type"];
      for (const SchemaJson& one : t.is_array() ? t : SchemaJson::array({t})) {
        const std::string n = one.is_string() ? one.get<std::string>() : "";
        ok = ok || (n == "null" && v.is_null()) || (n == "boolean" && v.is_boolean()) ||
             (n == "object" && v.is_object()) || (n == "array" && v.is_array()) ||
             (n == "string" && v.is_string()) || (n == "number" && v.is_number()) ||
             (n == "integer" &&
              (v.is_number_integer() || v.is_number_unsigned() ||
               (v.is_number_float() && v.get<double>() == std::floor(v.get<double>()))));
      }
      if (!ok) continue;
    }
    alts.push_back(gbnf_literal(v.dump()));
  }
  if (alts.empty()) {
    return Status::invalid_argument("no `enum`/`const` value is of the schema's `type`");
  }
  return join_alts(alts);
}

// anyOf / oneOf: one alternative per branch, each merged with the node's other keywords.
Result<std::string> SchemaCompiler::alternatives(const SchemaJson& s, const char* key,
                                                 std::string_view hint) {
  const SchemaJson& list = s[key];
  if (!list.is_array() || list.empty()) {
    return Status::invalid_argument(fmt::format("`{}` must be a non-empty array", key));
  }
  if (s.contains("anyOf") && s.contains("oneOf"))
    return unsupported("oneOf", "together with anyOf");
  SchemaJson rest = s;
  rest.erase(key);
  bool siblings = false;
  for (const auto& [k, v] : rest.items()) {
    siblings = siblings || (!is_annotation(k) && k != "$defs" && k != "definitions");
  }
  if (std::string_view(key) == "oneOf") {
    for (size_t i = 0; i < list.size(); ++i) {
      for (size_t j = i + 1; j < list.size(); ++j) {
        if (!provably_disjoint(*this, list[i], list[j])) {
          return unsupported("oneOf", fmt::format("branches {} and {} may both match a value "
                                                  "(keel generates oneOf as anyOf only when its "
                                                  "branches cannot overlap)",
                                                  i, j));
        }
      }
    }
  }
  std::vector<std::string> alts;
  for (const SchemaJson& sub : list) {
    if (!siblings) {
      KEEL_ASSIGN_OR_RETURN(std::string one, expr(sub, hint));
      alts.push_back(std::move(one));
      continue;
    }
    SchemaJson both = rest;
    both["allOf"] = SchemaJson::array({sub});
    KEEL_ASSIGN_OR_RETURN(std::string one, expr(keep(std::move(both)), hint));
    alts.push_back(std::move(one));
  }
  return join_alts(alts);
}

Result<std::string> SchemaCompiler::ref_rule(const SchemaJson& s) {
  if (!s["$ref"].is_string()) return Status::invalid_argument("`$ref` must be a string");
  const std::string path = s["$ref"].get<std::string>();
  if (auto it = refs_.find(path); it != refs_.end()) return it->second;
  KEEL_ASSIGN_OR_RETURN(const SchemaJson* target, resolve(path));
  const std::string rule = writer_.fresh("ref");
  refs_[path] = rule;  // before compiling the target: recursion refers to the rule
  KEEL_ASSIGN_OR_RETURN(std::string body, expr(*target, "def"));
  writer_.define(rule, body);
  return rule;
}

std::string gbnf_literal(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      out += fmt::format("\\x{:02X}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Result<std::string> json_schema_to_gbnf(const SchemaJson& schema) {
  KEEL_ASSIGN_OR_RETURN(std::string rules, SchemaCompiler(schema, "").run("root"));
  return rules + std::string(kPrimitives);
}

Result<std::string> json_schema_rules(const SchemaJson& schema, std::string_view rule_name) {
  return SchemaCompiler(schema, std::string(rule_name) + "-").run(rule_name);
}

std::string_view json_primitives_gbnf() { return kPrimitives; }

std::string json_object_gbnf() {
  return std::string("root ::= json-object\n") + std::string(kPrimitives);
}

}  // namespace keel::grammar
