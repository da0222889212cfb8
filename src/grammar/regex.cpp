// Regex → GBNF (regex.h): recursive descent over the pattern, emitting GBNF text.
#include "grammar/regex.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/utf8_ranges.h"

namespace keel::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

Ranges complement(const Ranges& r) {
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : normalize(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = std::max(next, hi + 1);
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

Ranges subtract(const Ranges& a, const Ranges& b) {
  Ranges keep = complement(b);
  Ranges out;
  for (auto [lo, hi] : normalize(a)) {
    for (auto [klo, khi] : keep) {
      const uint32_t l = std::max(lo, klo), h = std::min(hi, khi);
      if (l <= h) out.emplace_back(l, h);
    }
  }
  return out;
}

std::string class_text(const Ranges& r) {
  std::string s = "[";
  for (auto [lo, hi] : r) {
    s += fmt::format("\\U{:08X}", lo);
    if (hi != lo) s += fmt::format("-\\U{:08X}", hi);
  }
  return s + "]";
}

class RegexParser {
 public:
  RegexParser(std::string_view p, bool json) : p_(p), json_(json) {}

  Result<RegexParts> run(bool lookaheads) {
    RegexParts parts;
    parts.anchored_start = peek() == '^';
    size_t escapes = 0;  // backslashes before a final '$'
    while (p_.size() >= 2 + escapes && p_[p_.size() - 2 - escapes] == '\\') ++escapes;
    parts.anchored_end = !p_.empty() && p_.back() == '$' && escapes % 2 == 0;
    if (peek() == '^') ++pos_;
    while (lookaheads && peek() == '(' && peek(1) == '?' && (peek(2) == '=' || peek(2) == '!')) {
      const bool negative = peek(2) == '!';
      pos_ += 3;
      if (peek() == '^') ++pos_;  // a redundant anchor inside the leading lookahead
      in_lookahead_ = true;
      lookahead_end_ = false;
      KEEL_ASSIGN_OR_RETURN(std::string x, alternation());
      in_lookahead_ = false;
      if (peek() != ')') return error("expected `)`");
      ++pos_;
      parts.lookaheads.push_back({negative, lookahead_end_, std::move(x)});
    }
    KEEL_ASSIGN_OR_RETURN(std::string e, alternation());
    if (pos_ < p_.size()) return error("unbalanced `)`");
    parts.expr = e.empty() ? std::string("\"\"") : e;
    return parts;
  }

 private:
  char peek(size_t k = 0) const { return pos_ + k < p_.size() ? p_[pos_ + k] : '\0'; }
  bool eof() const { return pos_ >= p_.size(); }
  Status error(std::string_view what) const {
    return Status::invalid_argument(fmt::format("regex: {} at offset {}", what, pos_));
  }

  Result<std::string> alternation() {
    std::string out;
    for (bool first = true;; first = false) {
      KEEL_ASSIGN_OR_RETURN(std::string seq, sequence());
      if (!first) out += " | ";
      out += seq.empty() ? "\"\"" : seq;
      if (peek() != '|') break;
      ++pos_;
    }
    return "(" + out + ")";
  }

  Result<std::string> sequence() {
    std::string out;
    while (!eof() && peek() != '|' && peek() != ')') {
      if (peek() == '$' && pos_ + 1 == p_.size()) {
        ++pos_;
        break;
      }
      if (peek() == '$' && in_lookahead_ && depth_ == 0 && peek(1) == ')') {
        ++pos_;
        lookahead_end_ = true;
        break;
      }
      KEEL_ASSIGN_OR_RETURN(std::string atom, parse_atom());
      KEEL_ASSIGN_OR_RETURN(std::string q, quantifier());
      out += (out.empty() ? "" : " ") + atom + q;
    }
    return out;
  }

  Result<std::string> quantifier() {
    std::string q;
    const char c = peek();
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++pos_;
    } else if (c == '{' && peek(1) >= '0' && peek(1) <= '9') {
      const size_t close = p_.find('}', pos_);
      if (close == std::string_view::npos) return error("unterminated `{`");
      q = std::string(p_.substr(pos_, close - pos_ + 1));
      pos_ = close + 1;
    } else {
      return q;
    }
    if (peek() == '?') ++pos_;  // lazy: the same language
    if (peek() == '+') return error("possessive quantifiers are not supported");
    return q;
  }

  Result<uint32_t> code_point() {
    const auto c = static_cast<unsigned char>(peek());
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > p_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(p_[pos_ + i]) & 0x3F);
    pos_ += n;
    return cp;
  }

  Result<uint32_t> hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      const int d = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
      if (d < 0) return error("expected a hexadecimal digit");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // After a backslash: a class (\d ...) into *ranges, or a single character.
  Result<Ranges> escape() {
    const char e = peek();
    ++pos_;
    const Ranges digit = {{'0', '9'}};
    const Ranges word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    const Ranges space = {{'\t', '\r'}, {' ', ' '}};
    switch (e) {
      case 'd':
        return digit;
      case 'D':
        return complement(digit);
      case 'w':
        return word;
      case 'W':
        return complement(word);
      case 's':
        return space;
      case 'S':
        return complement(space);
      case 'n':
        return Ranges{{'\n', '\n'}};
      case 'r':
        return Ranges{{'\r', '\r'}};
      case 't':
        return Ranges{{'\t', '\t'}};
      case 'f':
        return Ranges{{'\f', '\f'}};
      case 'v':
        return Ranges{{'\v', '\v'}};
      case 'x': {
        KEEL_ASSIGN_OR_RETURN(uint32_t v, hex(2));
        return Ranges{{v, v}};
      }
      case 'u': {
        KEEL_ASSIGN_OR_RETURN(uint32_t v, hex(4));
        return Ranges{{v, v}};
      }
      default:
        break;
    }
    const auto u = static_cast<unsigned char>(e);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9')) {
      --pos_;
      return error(fmt::format("escape `\\{}` is not supported", e));
    }
    return Ranges{{u, u}};
  }

  Result<Ranges> bracket() {
    ++pos_;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    Ranges r;
    bool first = true;
    while (first || peek() != ']') {
      first = false;
      if (eof()) return error("unterminated `[`");
      Ranges one;
      if (peek() == '\\') {
        ++pos_;
        KEEL_ASSIGN_OR_RETURN(one, escape());
      } else {
        KEEL_ASSIGN_OR_RETURN(uint32_t cp, code_point());
        one = {{cp, cp}};
      }
      if (one.size() == 1 && one[0].first == one[0].second && peek() == '-' && peek(1) != ']' &&
          peek(1) != '\0') {
        ++pos_;
        uint32_t hi = 0;
        if (peek() == '\\') {
          ++pos_;
          KEEL_ASSIGN_OR_RETURN(Ranges h, escape());
          if (h.size() != 1 || h[0].first != h[0].second) return error("bad class range");
          hi = h[0].first;
        } else {
          KEEL_ASSIGN_OR_RETURN(hi, code_point());
        }
        if (hi < one[0].first) return error("class range out of order");
        one[0].second = hi;
      }
      r.insert(r.end(), one.begin(), one.end());
    }
    ++pos_;
    return negated ? complement(r) : normalize(r);
  }

  // A character set as GBNF (JSON-safe when json_).
  Result<std::string> chars(const Ranges& r) {
    Ranges out = normalize(r);
    if (json_) out = subtract(out, {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}});
    if (out.empty()) return error("character class matches nothing that keel can emit");
    if (out.size() == 1 && out[0].first == out[0].second) return literal(out[0].first);
    return class_text(out);
  }

  std::string literal(uint32_t cp) {
    std::string text = encode_utf8(cp);
    if (json_) {
      if (cp == '"' || cp == '\\') text = "\\" + text;
      if (cp == '\n') text = "\\n";
      if (cp == '\t') text = "\\t";
      if (cp == '\r') text = "\\r";
      if (cp == '\f') text = "\\f";
      if (cp == '\b') text = "\\b";
    }
    return gbnf_literal(text);
  }

  Result<std::string> parse_atom() {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (peek(1) != ':') return error("lookaround and named groups are not supported");
        pos_ += 2;
      }
      ++depth_;
      KEEL_ASSIGN_OR_RETURN(std::string inner, alternation());
      --depth_;
      if (peek() != ')') return error("expected `)`");
      ++pos_;
      return inner;
    }
    if (c == '[') {
      KEEL_ASSIGN_OR_RETURN(Ranges r, bracket());
      return chars(r);
    }
    if (c == '.') {
      ++pos_;
      return chars(complement({{'\n', '\n'}}));
    }
    if (c == '\\') {
      ++pos_;
      if (peek() == 'b' || peek() == 'B') return error("word boundaries are not supported");
      if (peek() >= '1' && peek() <= '9') return error("backreferences are not supported");
      KEEL_ASSIGN_OR_RETURN(Ranges r, escape());
      if (r.size() == 1 && r[0].first == r[0].second) {
        if (json_ && (r[0].first < 0x20 && r[0].first != '\n' && r[0].first != '\t' &&
                      r[0].first != '\r' && r[0].first != '\f' && r[0].first != '\b')) {
          return error("control character in a JSON string pattern");
        }
        return literal(r[0].first);
      }
      return chars(r);
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return error("quantifier without an atom");
    if (c == '^' || c == '$') return error("anchors are supported only at the ends");
    KEEL_ASSIGN_OR_RETURN(uint32_t cp, code_point());
    return literal(cp);
  }

  std::string_view p_;
  bool json_;
  size_t pos_ = 0;
  int depth_ = 0;               // open groups
  bool in_lookahead_ = false;   // parsing a leading lookahead's body
  bool lookahead_end_ = false;  // ... which ended with $
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string) {
  KEEL_ASSIGN_OR_RETURN(RegexParts parts, RegexParser(pattern, json_string).run(false));
  return parts.expr;
}

Result<RegexParts> regex_parts(std::string_view pattern, bool json_string) {
  return RegexParser(pattern, json_string).run(true);
}

std::optional<bool> regex_search(std::string_view pattern, std::string_view text) {
  Result<RegexParts> parts = RegexParser(pattern, false).run(false);
  if (!parts.ok()) return std::nullopt;
  const std::string gbnf = fmt::format("root ::= {}{}{}\n", parts->anchored_start ? "" : ".* ",
                                       parts->expr, parts->anchored_end ? "" : " .*");
  Result<Grammar> g = parse_gbnf(gbnf);
  if (!g.ok()) return std::nullopt;
  StackSet s = initial_state(*g);
  return advance(*g, text, &s) && s.has_complete();
}

Result<std::string> regex_grammar(std::string_view pattern) {
  KEEL_ASSIGN_OR_RETURN(std::string e, regex_to_gbnf(pattern, false));
  return "root ::= " + e + "\n";
}

}  // namespace keel::grammar
