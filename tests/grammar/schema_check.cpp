// The test-side JSON Schema checker (schema_check.h).
#include "grammar/schema_check.h"

#include <regex>

namespace keel::grammar::testing {
namespace {

using Json = nlohmann::json;

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool has_type(const Json& doc, const std::string& t) {
  if (t == "object") return doc.is_object();
  if (t == "array") return doc.is_array();
  if (t == "string") return doc.is_string();
  if (t == "number") return doc.is_number();
  if (t == "integer") return doc.is_number_integer();
  if (t == "boolean") return doc.is_boolean();
  if (t == "null") return doc.is_null();
  return false;
}

}  // namespace

std::string schema_violation(const Json& doc, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "schema false";
  if (s.contains("$ref")) {
    const std::string ref = s["$ref"];
    const std::string sec = ref.rfind("#/$defs/", 0) == 0 ? "$defs" : "definitions";
    return schema_violation(doc, root[sec][ref.substr(sec.size() + 3)], root);
  }
  if (s.contains("const") && doc != s["const"]) return "const " + s["const"].dump();
  if (s.contains("enum")) {
    bool found = false;
    for (const Json& v : s["enum"]) found = found || v == doc;
    if (!found) return "not in enum";
  }
  if (s.contains("anyOf")) {
    for (const Json& sub : s["anyOf"]) {
      if (schema_violation(doc, sub, root).empty()) return "";
    }
    return "no anyOf branch";
  }
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = has_type(doc, s["type"]);
    for (const Json& t : s["type"].is_array() ? s["type"] : Json::array()) {
      ok = ok || has_type(doc, t);
    }
    if (!ok) return "type " + s["type"].dump() + " vs " + doc.dump();
  }
  if (doc.is_object()) {
    const Json props = s.value("properties", Json::object());
    for (const Json& r : s.value("required", Json::array())) {
      if (!doc.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
    }
    for (const auto& [k, v] : doc.items()) {
      if (props.contains(k)) {
        std::string why = schema_violation(v, props[k], root);
        if (!why.empty()) return k + ": " + why;
      } else if (s.contains("additionalProperties")) {
        if (s["additionalProperties"] == false) return "additional " + k;
        std::string why = schema_violation(v, s["additionalProperties"], root);
        if (!why.empty()) return k + ": " + why;
      }
    }
  }
  if (doc.is_array()) {
    if (s.contains("minItems") && doc.size() < s["minItems"].get<size_t>()) return "minItems";
    if (s.contains("maxItems") && doc.size() > s["maxItems"].get<size_t>()) return "maxItems";
    if (s.contains("items")) {
      for (const Json& v : doc) {
        std::string why = schema_violation(v, s["items"], root);
        if (!why.empty()) return "item: " + why;
      }
    }
  }
  if (doc.is_string()) {
    const std::string str = doc.get<std::string>();
    if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>()) {
      return "minLength";
    }
    if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>()) {
      return "maxLength";
    }
    if (s.contains("pattern") &&
        !std::regex_search(str, std::regex(s["pattern"].get<std::string>()))) {
      return "pattern " + s["pattern"].get<std::string>() + " vs " + str;
    }
  }
  return "";
}

}  // namespace keel::grammar::testing
