// JSON Schema → GBNF (json_schema.h): one rule per schema node, shared rules for the primitives.
#include "grammar/json_schema.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "grammar/regex.h"

namespace keel::grammar {
namespace {

using Json = nlohmann::json;

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

const std::set<std::string_view> kAnnotations = {"title",   "description", "default", "examples",
                                                 "$schema", "$id",         "$comment"};

class Compiler {
 public:
  Compiler(const Json& root, std::string_view prefix) : root_(root), prefix_(prefix) {}

  // `top ::= ...` and the rules it needs (without the shared primitives).
  Result<std::string> run(std::string_view top) {
    KEEL_ASSIGN_OR_RETURN(std::string expr, rule_for(root_, "root"));
    return fmt::format("{} ::= {}\n", top, expr) + rules_;
  }

 private:
  std::string fresh(std::string_view hint) {
    return fmt::format("{}s{}-{}", prefix_, next_++, hint);
  }

  // A GBNF expression matching `s`; may add rules.
  Result<std::string> rule_for(const Json& s, std::string_view hint) {
    if (s.is_boolean()) {
      if (s.get<bool>()) return std::string("json-value");
      return Status::invalid_argument("schema `false` matches nothing");
    }
    if (!s.is_object()) return Status::invalid_argument("a schema must be an object or a boolean");
    for (const auto& [key, value] : s.items()) {
      if (kAnnotations.count(key) != 0) continue;
      static const std::set<std::string_view> kKnown = {
          "type",     "properties", "required",  "additionalProperties",
          "enum",     "const",      "items",     "minItems",
          "maxItems", "minLength",  "maxLength", "pattern",
          "anyOf",    "$ref",       "$defs",     "definitions"};
      if (kKnown.count(key) == 0) {
        return Status::invalid_argument(
            fmt::format("JSON Schema keyword `{}` is not supported", key));
      }
    }
    if (s.contains("$ref")) return ref_rule(s["$ref"]);
    if (s.contains("const")) return gbnf_literal(s["const"].dump());
    if (s.contains("enum")) return enum_rule(s["enum"]);
    if (s.contains("anyOf")) return any_of(s["anyOf"], hint);
    if (!s.contains("type")) {
      if (s.contains("properties")) return object_rule(s, hint);
      if (s.contains("items")) return array_rule(s, hint);
      return std::string("json-value");
    }
    const Json& type = s["type"];
    if (type.is_string()) return typed(s, type.get<std::string>(), hint);
    if (!type.is_array() || type.empty()) {
      return Status::invalid_argument("`type` must be a string or a non-empty array of strings");
    }
    std::string alts;
    for (const Json& t : type) {
      if (!t.is_string()) return Status::invalid_argument("`type` entries must be strings");
      KEEL_ASSIGN_OR_RETURN(std::string one, typed(s, t.get<std::string>(), hint));
      alts += (alts.empty() ? "" : " | ") + one;
    }
    return "(" + alts + ")";
  }

  Result<std::string> typed(const Json& s, const std::string& type, std::string_view hint) {
    if (type == "object") return object_rule(s, hint);
    if (type == "array") return array_rule(s, hint);
    if (type == "string") return string_rule(s, hint);
    if (type == "number") return std::string("json-number");
    if (type == "integer") return std::string("json-integer");
    if (type == "boolean") return std::string("json-boolean");
    if (type == "null") return std::string("json-null");
    return Status::invalid_argument(fmt::format("JSON Schema type `{}` is not supported", type));
  }

  Result<std::string> enum_rule(const Json& values) {
    if (!values.is_array() || values.empty()) {
      return Status::invalid_argument("`enum` must be a non-empty array");
    }
    std::string alts;
    for (const Json& v : values) alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.dump());
    return "(" + alts + ")";
  }

  Result<std::string> any_of(const Json& list, std::string_view hint) {
    if (!list.is_array() || list.empty()) {
      return Status::invalid_argument("`anyOf` must be a non-empty array");
    }
    std::string alts;
    for (const Json& sub : list) {
      KEEL_ASSIGN_OR_RETURN(std::string one, rule_for(sub, hint));
      alts += (alts.empty() ? "" : " | ") + one;
    }
    return "(" + alts + ")";
  }

  Result<std::string> ref_rule(const Json& ref) {
    if (!ref.is_string()) return Status::invalid_argument("`$ref` must be a string");
    const std::string path = ref.get<std::string>();
    if (auto it = refs_.find(path); it != refs_.end()) return it->second;
    std::string section;
    for (std::string_view prefix : {"#/$defs/", "#/definitions/"}) {
      if (path.rfind(prefix, 0) == 0) section = std::string(prefix.substr(2, prefix.size() - 3));
    }
    const std::string name = section.empty() ? "" : path.substr(section.size() + 3);
    if (section.empty() || !root_.is_object() || !root_.contains(section) ||
        !root_[section].is_object() || !root_[section].contains(name)) {
      return Status::invalid_argument(
          fmt::format("`$ref` \"{}\" is not supported (only #/$defs/NAME and "
                      "#/definitions/NAME within the schema)",
                      path));
    }
    const std::string rule = fresh("ref");
    refs_[path] = rule;  // before compiling the target: recursion refers to the rule
    KEEL_ASSIGN_OR_RETURN(std::string body, rule_for(root_[section][name], "def"));
    rules_ += fmt::format("{} ::= {}\n", rule, body);
    return rule;
  }

  static Result<int64_t> count(const Json& s, const char* key, int64_t dflt) {
    if (!s.contains(key)) return dflt;
    const Json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 4096) {
      return Status::invalid_argument(fmt::format("`{}` must be an integer in [0, 4096]", key));
    }
    return v.get<int64_t>();
  }

  Result<std::string> string_rule(const Json& s, std::string_view hint) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return Status::invalid_argument("`pattern` must be a string");
      if (s.contains("minLength") || s.contains("maxLength")) {
        return Status::invalid_argument(
            "`pattern` together with `minLength`/`maxLength` is not "
            "supported");
      }
      KEEL_ASSIGN_OR_RETURN(std::string body,
                            regex_to_gbnf(s["pattern"].get<std::string>(), /*json_string=*/true));
      const std::string rule = fresh(hint);
      rules_ += fmt::format("{} ::= \"\\\"\" ({}) \"\\\"\"\n", rule, body);
      return rule;
    }
    KEEL_ASSIGN_OR_RETURN(int64_t min, count(s, "minLength", 0));
    KEEL_ASSIGN_OR_RETURN(int64_t max, count(s, "maxLength", -1));
    if (!s.contains("minLength") && !s.contains("maxLength")) return std::string("json-string");
    if (max >= 0 && max < min) return Status::invalid_argument("`maxLength` below `minLength`");
    const std::string rule = fresh(hint);
    rules_ += fmt::format("{} ::= \"\\\"\" json-char{{{},{}}} \"\\\"\"\n", rule, min,
                          max >= 0 ? std::to_string(max) : "");
    return rule;
  }

  Result<std::string> array_rule(const Json& s, std::string_view hint) {
    std::string item = "json-value";
    if (s.contains("items")) {
      KEEL_ASSIGN_OR_RETURN(item, rule_for(s["items"], "item"));
    }
    KEEL_ASSIGN_OR_RETURN(int64_t min, count(s, "minItems", 0));
    KEEL_ASSIGN_OR_RETURN(int64_t max, count(s, "maxItems", -1));
    if (max >= 0 && max < min) return Status::invalid_argument("`maxItems` below `minItems`");
    const std::string rule = fresh(hint);
    const std::string more = fmt::format("(\",\" ws {} ws)", item);
    std::string body;
    if (max == 0) {
      body = "\"[\" ws \"]\"";
    } else if (min == 0) {
      body = fmt::format("\"[\" ws ({} ws {}{{0,{}}})? \"]\"", item, more,
                         max > 0 ? std::to_string(max - 1) : "");
    } else {
      body = fmt::format("\"[\" ws {} ws {}{{{},{}}} \"]\"", item, more, min - 1,
                         max > 0 ? std::to_string(max - 1) : "");
    }
    rules_ += fmt::format("{} ::= {}\n", rule, body);
    return rule;
  }

  Result<std::string> object_rule(const Json& s, std::string_view hint) {
    std::vector<std::pair<std::string, const Json*>> props;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) {
        return Status::invalid_argument("`properties` must be an object");
      }
      for (const auto& [k, v] : s["properties"].items()) props.emplace_back(k, &v);
    }
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) return Status::invalid_argument("`required` must be an array");
      for (const Json& r : s["required"]) {
        if (!r.is_string()) return Status::invalid_argument("`required` entries must be strings");
        required.insert(r.get<std::string>());
      }
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const auto& p : props) found = found || p.first == r;
      if (!found) {
        return Status::invalid_argument(
            fmt::format("required property `{}` is not in `properties`", r));
      }
    }
    const std::string obj = fresh(hint);
    // first_i: the members from i on when none was written yet; rest_i: after one was.
    const size_t n = props.size();
    std::vector<std::string> kv(n);
    for (size_t i = 0; i < n; ++i) {
      KEEL_ASSIGN_OR_RETURN(std::string value, rule_for(*props[i].second, "prop"));
      kv[i] = fmt::format("{} ws \":\" ws {} ws", gbnf_literal(Json(props[i].first).dump()), value);
    }
    auto first = [&](size_t i) { return fmt::format("{}-f{}", obj, i); };
    auto rest = [&](size_t i) { return fmt::format("{}-r{}", obj, i); };
    for (size_t i = n; i-- > 0;) {
      const bool req = required.count(props[i].first) != 0;
      const std::string next_rest = i + 1 < n ? rest(i + 1) : "";
      rules_ += fmt::format("{} ::= {} {}{}\n", first(i), kv[i], next_rest,
                            req ? "" : (i + 1 < n ? " | " + first(i + 1) : " | "));
      rules_ += fmt::format("{} ::= \",\" ws {} {}{}\n", rest(i), kv[i], next_rest,
                            req ? "" : (i + 1 < n ? " | " + rest(i + 1) : " | "));
    }
    rules_ += fmt::format("{} ::= \"{{\" ws {} \"}}\"\n", obj, n > 0 ? first(0) : "");
    return obj;
  }

  const Json& root_;
  std::string prefix_;  // prepended to every rule name made here
  std::string rules_;
  std::map<std::string, std::string> refs_;
  int next_ = 0;
};

}  // namespace

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

Result<std::string> json_schema_to_gbnf(const nlohmann::json& schema) {
  KEEL_ASSIGN_OR_RETURN(std::string rules, Compiler(schema, "").run("root"));
  return rules + std::string(kPrimitives);
}

Result<std::string> json_schema_rules(const nlohmann::json& schema, std::string_view rule_name) {
  return Compiler(schema, std::string(rule_name) + "-").run(rule_name);
}

std::string_view json_primitives_gbnf() { return kPrimitives; }

std::string json_object_gbnf() {
  return std::string("root ::= json-object\n") + std::string(kPrimitives);
}

}  // namespace keel::grammar
