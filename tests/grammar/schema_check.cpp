// The test-side JSON Schema checker (schema_check.h).
#include "grammar/schema_check.h"

#include <regex>

#include "grammar/format_check.h"

namespace keel::grammar::testing {
namespace {

using Json = nlohmann::ordered_json;
__extension__ typedef __int128 Wide;  // decimal mantissas scaled to a common exponent

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

bool integral(const Json& doc) {
  if (doc.is_number_integer() || doc.is_number_unsigned()) return true;
  if (!doc.is_number_float()) return false;
  const double d = doc.get<double>();
  return d == static_cast<double>(static_cast<long long>(d));
}

bool has_type(const Json& doc, const std::string& t) {
  if (t == "object") return doc.is_object();
  if (t == "array") return doc.is_array();
  if (t == "string") return doc.is_string();
  if (t == "number") return doc.is_number();
  if (t == "integer") return doc.is_number() && integral(doc);
  if (t == "boolean") return doc.is_boolean();
  if (t == "null") return doc.is_null();
  return false;
}

// A number's shortest text as m × 10^e (m at most 18 digits).
bool decimal_of(const Json& v, Wide* m, int* e) {
  std::string t = v.dump();
  *m = 0;
  *e = 0;
  bool neg = false, point = false;
  size_t i = 0;
  if (i < t.size() && t[i] == '-') neg = (++i, true);
  for (; i < t.size() && (std::isdigit(static_cast<unsigned char>(t[i])) || t[i] == '.'); ++i) {
    if (t[i] == '.') {
      point = true;
      continue;
    }
    *m = *m * 10 + (t[i] - '0');
    if (point) --*e;
  }
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) *e += std::atoi(t.c_str() + i + 1);
  if (neg) *m = -*m;
  return true;
}

bool multiple_of(const Json& x, const Json& k) {
  Wide mx, mk;
  int ex, ek;
  decimal_of(x, &mx, &ex);
  decimal_of(k, &mk, &ek);
  const int e = std::min(ex, ek);
  for (int i = e; i < ex; ++i) mx *= 10;
  for (int i = e; i < ek; ++i) mk *= 10;
  return mk != 0 && mx % mk == 0;
}

std::string pointer_token(const std::string& t) {
  std::string out;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '~' && i + 1 < t.size()) {
      out += t[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += t[i];
    }
  }
  return out;
}

const Json* resolve(const std::string& ref, const Json& root) {
  const Json* at = &root;
  size_t pos = 1;
  while (pos < ref.size()) {
    const size_t next = ref.find('/', pos + 1);
    const std::string tok = pointer_token(
        ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1));
    if (at->is_object() && at->contains(tok)) {
      at = &(*at)[tok];
    } else if (at->is_array()) {
      at = &(*at)[std::stoul(tok)];
    } else {
      return nullptr;
    }
    pos = next == std::string::npos ? ref.size() : next;
  }
  return at;
}

bool search(const std::string& pattern, const std::string& s) {
  return std::regex_search(s, std::regex(pattern, std::regex::ECMAScript));
}

std::string check_number(const Json& doc, const Json& s) {
  const double x = doc.get<double>();
  auto num = [&](const char* k) { return s[k].get<double>(); };
  if (s.contains("minimum") && x < num("minimum")) return "minimum vs " + doc.dump();
  if (s.contains("maximum") && x > num("maximum")) return "maximum vs " + doc.dump();
  if (s.contains("exclusiveMinimum") && s["exclusiveMinimum"].is_number() &&
      x <= num("exclusiveMinimum")) {
    return "exclusiveMinimum vs " + doc.dump();
  }
  if (s.contains("exclusiveMaximum") && s["exclusiveMaximum"].is_number() &&
      x >= num("exclusiveMaximum")) {
    return "exclusiveMaximum vs " + doc.dump();
  }
  if (s.contains("multipleOf") && !multiple_of(doc, s["multipleOf"])) {
    return "multipleOf vs " + doc.dump();
  }
  return "";
}

std::string check_string(const std::string& str, const Json& s) {
  if (s.contains("minLength") && code_points(str) < s["minLength"].get<size_t>())
    return "minLength";
  if (s.contains("maxLength") && code_points(str) > s["maxLength"].get<size_t>())
    return "maxLength";
  if (s.contains("pattern") && !search(s["pattern"].get<std::string>(), str)) {
    return "pattern " + s["pattern"].get<std::string>() + " vs " + str;
  }
  if (s.contains("format") && !format_valid(s["format"].get<std::string>(), str)) {
    return "format " + s["format"].get<std::string>() + " vs " + str;
  }
  return "";
}

std::string check_object(const Json& doc, const Json& s, const Json& root) {
  const Json props = s.value("properties", Json::object());
  const Json patterns = s.value("patternProperties", Json::object());
  const Json required = s.value("required", Json::array());
  for (const Json& r : required) {
    if (!doc.contains(r.get<std::string>())) return "missing " + r.get<std::string>();
  }
  if (s.contains("minProperties") && doc.size() < s["minProperties"].get<size_t>()) {
    return "minProperties";
  }
  if (s.contains("maxProperties") && doc.size() > s["maxProperties"].get<size_t>()) {
    return "maxProperties";
  }
  for (const auto& [k, v] : doc.items()) {
    if (s.contains("propertyNames")) {
      std::string why = schema_violation(Json(k), s["propertyNames"], root);
      if (!why.empty()) return "propertyNames " + k + ": " + why;
    }
    bool matched = false;
    if (props.contains(k)) {
      matched = true;
      std::string why = schema_violation(v, props[k], root);
      if (!why.empty()) return k + ": " + why;
    }
    for (const auto& [re, sub] : patterns.items()) {
      if (!search(re, k)) continue;
      matched = true;
      std::string why = schema_violation(v, sub, root);
      if (!why.empty()) return k + ": " + why;
    }
    if (!matched && s.contains("additionalProperties")) {
      std::string why = schema_violation(v, s["additionalProperties"], root);
      if (!why.empty()) return "additional " + k + ": " + why;
    }
  }
  return "";
}

std::string check_array(const Json& doc, const Json& s, const Json& root) {
  if (s.contains("minItems") && doc.size() < s["minItems"].get<size_t>()) return "minItems";
  if (s.contains("maxItems") && doc.size() > s["maxItems"].get<size_t>()) return "maxItems";
  Json prefix = s.value("prefixItems", Json::array());
  Json rest =
      s.contains("prefixItems") ? s.value("items", Json(true)) : s.value("items", Json(true));
  if (!s.contains("prefixItems") && s.contains("items") && s["items"].is_array()) {
    prefix = s["items"];
    rest = s.value("additionalItems", Json(true));
  }
  for (size_t i = 0; i < doc.size(); ++i) {
    const Json& sub = i < prefix.size() ? prefix[i] : rest;
    std::string why = schema_violation(doc[i], sub, root);
    if (!why.empty()) return "item " + std::to_string(i) + ": " + why;
  }
  if (s.value("uniqueItems", false)) {
    for (size_t i = 0; i < doc.size(); ++i) {
      for (size_t j = i + 1; j < doc.size(); ++j) {
        if (doc[i] == doc[j]) return "uniqueItems";
      }
    }
  }
  return "";
}

}  // namespace

std::string schema_violation(const Json& doc, const Json& s, const Json& root) {
  if (s.is_boolean()) return s.get<bool>() ? "" : "schema false";
  if (s.contains("$ref")) {
    const Json* target = resolve(s["$ref"].get<std::string>(), root);
    if (target == nullptr) return "bad $ref";
    std::string why = schema_violation(doc, *target, root);
    if (!why.empty()) return why;
  }
  if (s.contains("const") && doc != s["const"]) return "const " + s["const"].dump();
  if (s.contains("enum")) {
    bool found = false;
    for (const Json& v : s["enum"]) found = found || v == doc;
    if (!found) return "not in enum: " + doc.dump();
  }
  const Json all = s.value("allOf", Json::array());
  for (const Json& sub : all) {
    std::string why = schema_violation(doc, sub, root);
    if (!why.empty()) return "allOf: " + why;
  }
  if (s.contains("anyOf")) {
    bool any = false;
    for (const Json& sub : s["anyOf"]) any = any || schema_violation(doc, sub, root).empty();
    if (!any) return "no anyOf branch";
  }
  if (s.contains("oneOf")) {
    int n = 0;
    for (const Json& sub : s["oneOf"]) n += schema_violation(doc, sub, root).empty() ? 1 : 0;
    if (n != 1) return "oneOf: " + std::to_string(n) + " branches match";
  }
  if (s.contains("not") && schema_violation(doc, s["not"], root).empty()) return "not";
  if (s.contains("type")) {
    bool ok = false;
    if (s["type"].is_string()) ok = has_type(doc, s["type"]);
    for (const Json& t : s["type"].is_array() ? s["type"] : Json::array()) {
      ok = ok || has_type(doc, t);
    }
    if (s.value("nullable", false) && doc.is_null()) ok = true;
    if (!ok) return "type " + s["type"].dump() + " vs " + doc.dump();
  }
  if (doc.is_number()) return check_number(doc, s);
  if (doc.is_string()) return check_string(doc.get<std::string>(), s);
  if (doc.is_object()) return check_object(doc, s, root);
  if (doc.is_array()) return check_array(doc, s, root);
  return "";
}

}  // namespace keel::grammar::testing
