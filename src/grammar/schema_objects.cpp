// Object keywords → GBNF (schema_compiler.h's object_expr).
// Members come in a fixed order: the declared properties in the schema's order (required ones
// listed but not declared follow, in `required` order), then undeclared members ("extras") when
// additionalProperties is true or a schema, or patternProperties is given. Absent
// additionalProperties makes no extras. Decisions:
//   - an extra's key never equals a declared name (additionalProperties: the keys exclude the
//     declared names; patternProperties: refused when a pattern matches a declared name);
//   - a declared name matching a pattern is held to both schemas; patternProperties together
//     with additionalProperties, or several patterns with different schemas, are refused;
//   - propertyNames: declared names it rejects are dropped (refused when required); extras' keys
//     follow it (with enum/const, minus the declared names);
//   - minProperties / maxProperties count members with the declared properties distinct and at
//     most one extra counted towards the minimum (a grammar cannot keep extras' keys distinct
//     from each other); a minimum that would need two extras is refused.
// Rules: state (i, c) = the next declared property i and the members written so far c (capped),
// so a grammar with counts has at most (properties + 1) × (cap + 1) member rules.
#include <fmt/format.h>

#include <map>
#include <set>
#include <vector>

#include "grammar/regex.h"
#include "grammar/schema_compiler.h"
#include "grammar/utf8_ranges.h"

namespace keel::grammar {
namespace {

constexpr int64_t kMaxCount = 256;
constexpr int64_t kUnbounded = -1;

struct Prop {
  std::string name;
  const SchemaJson* schema;
  bool required;
};

size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80 ? 1 : 0;
  return n;
}

// A pattern keel cannot run counts as not matching here; the key grammars then refuse it.
bool regex_finds(const std::string& pattern, const std::string& text) {
  return regex_search(pattern, text).value_or(false);
}

// Whether the key `name` satisfies propertyNames `pn` (nullopt: keel cannot tell).
std::optional<bool> name_allowed(const SchemaJson& pn, const std::string& name) {
  if (pn.is_boolean()) return pn.get<bool>();
  if (!pn.is_object()) return std::nullopt;
  for (const auto& [k, v] : pn.items()) {
    if (k == "type") {
      if (v != "string" && !(v.is_array() && std::find(v.begin(), v.end(), "string") != v.end())) {
        return false;
      }
    } else if (k == "const") {
      if (v != name) return false;
    } else if (k == "enum") {
      if (!v.is_array() || std::find(v.begin(), v.end(), name) == v.end()) return false;
    } else if (k == "minLength" || k == "maxLength") {
      if (!v.is_number_integer()) return std::nullopt;
      const int64_t n = static_cast<int64_t>(code_points(name));
      if (k == "minLength" ? n < v.get<int64_t>() : n > v.get<int64_t>()) return false;
    } else if (k == "pattern") {
      if (!v.is_string()) return std::nullopt;
      if (!regex_finds(v.get<std::string>(), name)) return false;
    } else if (k == "title" || k == "description" || k == "$comment") {
    } else {
      return std::nullopt;
    }
  }
  return true;
}

// Characters a key may use without escapes.
bool plain(const std::string& name) {
  for (char ch : name) {
    const auto u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7F || ch == '"' || ch == '\\') return false;
  }
  return true;
}

std::vector<uint32_t> decode(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n && i + k < s.size(); ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    out.push_back(cp);
    i += static_cast<size_t>(n);
  }
  return out;
}

// JSON string contents (no escapes) other than the given names: a trie of the names, leaving it
// by a character none of them has there.
std::string keys_except(RuleWriter& w, const std::vector<std::string>& names) {
  struct Node {
    std::map<uint32_t, int> kids;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& n : names) {
    if (!plain(n)) continue;  // a key without escapes never equals it
    int at = 0;
    for (uint32_t cp : decode(n)) {
      auto it = trie[at].kids.find(cp);
      if (it == trie[at].kids.end()) {
        trie[at].kids[cp] = static_cast<int>(trie.size());
        at = static_cast<int>(trie.size());
        trie.emplace_back();
      } else {
        at = it->second;
      }
    }
    trie[at].terminal = true;
  }
  const std::string base = w.fresh("key");
  const std::string any = base + "-any";
  w.define(any, "[^\"\\\\\\x00-\\x1F\\x7F]*");
  for (size_t i = trie.size(); i-- > 0;) {
    std::string alts = trie[i].terminal ? "" : "\"\"";
    std::string other = "[^\"\\\\\\x00-\\x1F\\x7F";
    for (const auto& [cp, kid] : trie[i].kids) {
      other += fmt::format("\\U{:08X}", cp);
      alts += fmt::format("{}{} {}-{}", alts.empty() ? "" : " | ", gbnf_literal(encode_utf8(cp)),
                          base, kid);
    }
    alts += fmt::format("{}{}] {}", alts.empty() ? "" : " | ", other, any);
    w.define(fmt::format("{}-{}", base, i), alts);
  }
  return fmt::format("\"\\\"\" {}-0 \"\\\"\"", base);
}

struct Members {
  std::vector<Prop> props;
  std::vector<std::string> values;  // per prop: its value's expression
  std::string extra;                // "" when no extras, else one member "key ws : ws value ws"
  int64_t min = 0;                  // minProperties to enforce (0: none)
  int64_t max = kUnbounded;         // maxProperties to enforce
};

// The member rules for state (i, c) (see the file comment).
class MemberWriter {
 public:
  MemberWriter(RuleWriter& w, const Members& m) : w_(w), m_(m) {
    cap_ = m.max != kUnbounded ? m.max : std::max<int64_t>(m.min, 1);
    const size_t n = m.props.size();
    left_.assign(n + 1, 0);
    left_required_.assign(n + 1, 0);
    for (size_t i = n; i-- > 0;) {
      left_[i] = left_[i + 1] + 1;
      left_required_[i] = left_required_[i + 1] + (m.props[i].required ? 1 : 0);
    }
    base_ = w.fresh("obj");
  }

  // nullopt when no object can be finished from (i, c).
  std::optional<std::string> at(size_t i, int64_t c) {
    if (!viable(i, c)) return std::nullopt;
    const std::string key = fmt::format("{}-{}", i, c);
    if (auto it = done_.find(key); it != done_.end()) return it->second;
    const std::string name = fmt::format("{}-d{}", base_, key);
    std::string alts;
    auto alt = [&](const std::string& a) { alts += (alts.empty() ? "" : " | ") + a; };
    if (i == m_.props.size()) {
      if (c >= m_.min) alt("\"\"");
      if (!m_.extra.empty() && fits(c + 1) && c + 1 >= m_.min) {
        alt(fmt::format("{}{} {}", sep(c), m_.extra, more(sat(c + 1))));
      }
    } else {
      if (fits(c + 1)) {
        if (auto next = at(i + 1, sat(c + 1))) {
          alt(fmt::format("{}{} ws \":\" ws {} ws {}", sep(c),
                          gbnf_literal(SchemaJson(m_.props[i].name).dump()), m_.values[i], *next));
        }
      }
      if (!m_.props[i].required) {
        if (auto next = at(i + 1, c)) alt(*next);
      }
    }
    if (alts.empty()) return done_[key] = std::nullopt;
    w_.define(name, alts);
    return done_[key] = name;
  }

 private:
  // More extras after at least one (the minimum is met already).
  std::string more(int64_t c) {
    const std::string key = fmt::format("x{}", c);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    const std::string name = fmt::format("{}-{}", base_, key);
    memo_[key] = name;
    std::string body = "\"\"";
    if (fits(c + 1)) body += fmt::format(" | \",\" ws {} {}", m_.extra, more(sat(c + 1)));
    w_.define(name, body);
    return name;
  }

  [[nodiscard]] bool fits(int64_t c) const { return m_.max == kUnbounded || c <= m_.max; }
  [[nodiscard]] int64_t sat(int64_t c) const { return std::min(c, cap_); }
  static std::string sep(int64_t c) { return c > 0 ? "\",\" ws " : ""; }
  [[nodiscard]] bool viable(size_t i, int64_t c) const {
    const int64_t most = c + left_[i] + (m_.extra.empty() ? 0 : 1);
    return most >= m_.min && fits(c + left_required_[i]);
  }

  RuleWriter& w_;
  const Members& m_;
  int64_t cap_;
  std::vector<int64_t> left_, left_required_;  // from property i on: all, required
  std::string base_;
  std::map<std::string, std::string> memo_;                 // `more` rules
  std::map<std::string, std::optional<std::string>> done_;  // member rules (acyclic)
};

Status read_props(SchemaCompiler& c, const SchemaJson& s, std::vector<Prop>* props) {
  std::set<std::string> required;
  std::vector<std::string> required_order;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Status::invalid_argument("`required` must be an array");
    for (const SchemaJson& r : s["required"]) {
      if (!r.is_string()) return Status::invalid_argument("`required` entries must be strings");
      if (required.insert(r.get<std::string>()).second)
        required_order.push_back(r.get<std::string>());
    }
  }
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) {
      return Status::invalid_argument("`properties` must be an object");
    }
    for (const auto& [k, v] : s["properties"].items()) {
      props->push_back({k, &v, required.count(k) != 0});
    }
  }
  for (const std::string& r : required_order) {
    if (s.contains("properties") && s["properties"].contains(r)) continue;
    // Required but not declared: held to the pattern or additionalProperties that applies.
    const SchemaJson* sub = &c.keep(SchemaJson(true));
    if (s.contains("patternProperties")) {
      for (const auto& [re, v] : s["patternProperties"].items()) {
        if (regex_finds(re, r)) sub = &v;
      }
    }
    if (sub->is_boolean() && s.contains("additionalProperties")) sub = &s["additionalProperties"];
    if (sub->is_boolean() && !sub->get<bool>()) {
      return Status::invalid_argument(fmt::format(
          "required property `{}` is not in `properties` and additionalProperties is false", r));
    }
    props->push_back({r, sub, true});
  }
  return Status();
}

// Declared names matching patternProperties are held to both schemas; propertyNames filters.
Status apply_name_rules(SchemaCompiler& c, const SchemaJson& s, std::vector<Prop>* props) {
  std::vector<Prop> kept;
  for (Prop& p : *props) {
    if (s.contains("patternProperties")) {
      for (const auto& [re, v] : s["patternProperties"].items()) {
        if (regex_finds(re, p.name)) {
          p.schema = &c.keep(SchemaJson{{"allOf", SchemaJson::array({*p.schema, v})}});
        }
      }
    }
    if (s.contains("propertyNames")) {
      std::optional<bool> ok = name_allowed(s["propertyNames"], p.name);
      if (!ok)
        return unsupported("propertyNames", "keel cannot check the declared names against it");
      if (!*ok) {
        if (p.required) {
          return Status::invalid_argument(
              fmt::format("required property `{}` does not satisfy `propertyNames`", p.name));
        }
        continue;
      }
    }
    kept.push_back(p);
  }
  *props = std::move(kept);
  return Status();
}

// The key expression of extras (a full JSON string), or "" when there are none.
Result<std::string> extra_key(SchemaCompiler& c, const SchemaJson& s,
                              const std::vector<Prop>& props, std::string* value) {
  const bool addl =
      s.contains("additionalProperties") &&
      !(s["additionalProperties"].is_boolean() && !s["additionalProperties"].get<bool>());
  const bool pat = s.contains("patternProperties") && !s["patternProperties"].empty();
  if (!addl && !pat) return std::string();
  if (addl && pat) return unsupported("patternProperties", "together with additionalProperties");
  const bool names = s.contains("propertyNames") && s["propertyNames"] != true;
  if (pat) {
    if (names) return unsupported("propertyNames", "together with patternProperties");
    const auto& pp = s["patternProperties"];
    std::string keys;
    for (const auto& [re, sub] : pp.items()) {
      if (sub != pp.begin().value()) {
        return unsupported("patternProperties", "several patterns with different schemas");
      }
      for (const Prop& p : props) {
        if (regex_finds(re, p.name)) {
          return unsupported("patternProperties", fmt::format("pattern \"{}\" also matches the "
                                                              "declared property `{}`",
                                                              re, p.name));
        }
      }
      KEEL_ASSIGN_OR_RETURN(std::string k, regex_to_gbnf(re, /*json_string=*/true));
      keys += (keys.empty() ? "" : " | ") + k;
    }
    KEEL_ASSIGN_OR_RETURN(*value, c.expr(pp.begin().value(), "val"));
    return fmt::format("\"\\\"\" ({}) \"\\\"\"", keys);
  }
  KEEL_ASSIGN_OR_RETURN(*value, c.expr(s["additionalProperties"], "val"));
  std::vector<std::string> declared;
  for (const Prop& p : props) declared.push_back(p.name);
  if (!names)
    return declared.empty() ? std::string("json-string") : keys_except(c.writer(), declared);
  const SchemaJson& pn = s["propertyNames"];
  if (declared.empty()) {
    SchemaJson keys = pn.is_object() ? pn : SchemaJson::object();
    if (!keys.contains("type")) keys["type"] = "string";
    return c.expr(c.keep(std::move(keys)), "key");
  }
  if (pn.is_object() && (pn.contains("enum") || pn.contains("const"))) {
    SchemaJson vals = pn.contains("const") ? SchemaJson::array({pn["const"]}) : pn["enum"];
    std::string alts;
    for (const SchemaJson& v : vals) {
      if (!v.is_string() || std::find(declared.begin(), declared.end(), v) != declared.end())
        continue;
      if (name_allowed(pn, v.get<std::string>()) != std::optional<bool>(true)) continue;
      alts += (alts.empty() ? "" : " | ") + gbnf_literal(v.dump());
    }
    return alts.empty() ? std::string() : "(" + alts + ")";
  }
  return unsupported("propertyNames",
                     "with declared properties and additionalProperties (only enum/const names)");
}

}  // namespace

Result<std::string> object_expr(SchemaCompiler& c, const SchemaJson& s) {
  Members m;
  KEEL_TRY(read_props(c, s, &m.props));
  if (s.contains("propertyNames") && s["propertyNames"] == false) {
    if (!m.props.empty() && m.props[0].required) {
      return Status::invalid_argument("`propertyNames` false allows no required property");
    }
    return c.writer().add("obj", "\"{\" ws \"}\"");
  }
  KEEL_TRY(apply_name_rules(c, s, &m.props));
  for (const Prop& p : m.props) {
    KEEL_ASSIGN_OR_RETURN(std::string v, c.expr(*p.schema, "prop"));
    m.values.push_back(std::move(v));
  }
  std::string value;
  KEEL_ASSIGN_OR_RETURN(std::string key, extra_key(c, s, m.props, &value));
  if (!key.empty()) m.extra = fmt::format("{} ws \":\" ws {} ws", key, value);
  KEEL_ASSIGN_OR_RETURN(int64_t min, count_keyword(s, "minProperties", 0));
  KEEL_ASSIGN_OR_RETURN(int64_t max, count_keyword(s, "maxProperties", kUnbounded));
  int64_t required = 0;
  for (const Prop& p : m.props) required += p.required ? 1 : 0;
  const int64_t n = static_cast<int64_t>(m.props.size());
  if (min > required) m.min = min;
  if (max != kUnbounded && (!m.extra.empty() || max < n)) m.max = max;
  if (m.max != kUnbounded && m.max < required) {
    return Status::invalid_argument("`maxProperties` is below the number of required properties");
  }
  if (m.min > n + (m.extra.empty() ? 0 : 1)) {
    return unsupported("minProperties",
                       m.extra.empty() ? "more than the properties the schema allows"
                                       : "it would need several undeclared properties, whose keys "
                                         "a grammar cannot keep distinct");
  }
  if (std::max(m.min, m.max) > kMaxCount) {
    return unsupported(m.max > kMaxCount ? "maxProperties" : "minProperties",
                       fmt::format("counts above {} are not supported", kMaxCount));
  }
  MemberWriter mw(c.writer(), m);
  std::optional<std::string> members = mw.at(0, 0);
  if (!members) {
    return Status::invalid_argument("the object's keywords leave no object to generate");
  }
  return c.writer().add("obj", fmt::format("\"{{\" ws {} \"}}\"", *members));
}

}  // namespace keel::grammar
