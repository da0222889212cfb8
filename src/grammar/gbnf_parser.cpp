// The GBNF parser (gbnf_parser.h): recursive descent over the text, building rules with a
// GrammarBuilder; groups, repetitions and non-ASCII character classes become anonymous rules.
#include "grammar/gbnf_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "grammar/utf8_ranges.h"

namespace keel::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Result<Grammar> run() {
    skip_space();
    if (eof()) return Status::invalid_argument("grammar is empty");
    while (!eof()) {
      KEEL_TRY(parse_rule());
      skip_space();
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) return Status::invalid_argument("grammar has no rule `root`");
    return std::move(b_).finish(root->second);
  }

 private:
  bool eof() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  Status error(std::string_view what) const {
    return Status::invalid_argument(fmt::format("grammar: {} at offset {}", what, pos_));
  }

  void skip_space() {
    while (!eof()) {
      const char c = peek();
      if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_name_char(peek())) ++pos_;
    return std::string(src_.substr(start, pos_ - start));
  }

  // True when the text at pos_ is `name ::=` (a new rule starts).
  bool at_rule_start() const {
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    if (p == pos_) return false;
    while (p < src_.size() && (src_[p] == ' ' || src_[p] == '\t')) ++p;
    return src_.substr(p, 3) == "::=";
  }

  uint32_t rule_id(const std::string& name) {
    auto [it, inserted] = ids_.emplace(name, 0);
    if (inserted) it->second = b_.add_rule(name);
    return it->second;
  }

  uint32_t anon_rule() { return b_.add_rule(fmt::format("_anon{}", b_.num_rules())); }

  Status parse_rule() {
    const std::string name = parse_name();
    if (name.empty()) return error("expected a rule name");
    skip_space();
    if (src_.substr(pos_, 3) != "::=") return error("expected `::=`");
    pos_ += 3;
    const uint32_t id = rule_id(name);
    if (!defined_.insert(id).second) {
      return Status::invalid_argument(fmt::format("grammar: rule `{}` is defined twice", name));
    }
    return parse_alternatives(id, false);
  }

  Status parse_alternatives(uint32_t rule, bool nested) {
    for (;;) {
      KEEL_ASSIGN_OR_RETURN(std::vector<Elem> seq, parse_sequence(nested));
      b_.add_alt(rule, seq);
      skip_space();
      if (peek() != '|') return Status();
      ++pos_;
    }
  }

  Result<std::vector<Elem>> parse_sequence(bool nested) {
    std::vector<Elem> seq;
    std::vector<Elem> last;  // the item a postfix operator applies to
    size_t last_start = 0;
    for (;;) {
      skip_space();
      const char c = peek();
      if (eof() || c == '|' || (c == ')' && nested) || at_rule_start()) break;
      if (c == ')') return error("unbalanced `)`");
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last.empty()) return error("repetition without an item");
        KEEL_ASSIGN_OR_RETURN(std::vector<Elem> rep, parse_repetition(last));
        seq.resize(last_start);
        seq.insert(seq.end(), rep.begin(), rep.end());
        last.clear();
        continue;
      }
      KEEL_ASSIGN_OR_RETURN(last, parse_item());
      last_start = seq.size();
      seq.insert(seq.end(), last.begin(), last.end());
    }
    return seq;
  }

  Result<std::vector<Elem>> parse_item() {
    const char c = peek();
    if (c == '"') return parse_literal();
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_elems({{0, kMaxCodePoint}});
    }
    if (c == '(') {
      ++pos_;
      const uint32_t rule = anon_rule();
      KEEL_TRY(parse_alternatives(rule, true));
      skip_space();
      if (peek() != ')') return error("expected `)`");
      ++pos_;
      return std::vector<Elem>{GrammarBuilder::ref(rule)};
    }
    if (is_name_char(c)) return std::vector<Elem>{GrammarBuilder::ref(rule_id(parse_name()))};
    return error(fmt::format("unexpected character `{}`", c));
  }

  Result<uint32_t> parse_hex(int digits) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = h - '0';
      if (h >= 'a' && h <= 'f') d = h - 'a' + 10;
      if (h >= 'A' && h <= 'F') d = h - 'A' + 10;
      if (d < 0) return error("expected a hexadecimal digit");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // One (possibly escaped) character as a code point.
  Result<uint32_t> parse_char() {
    if (eof()) return error("unexpected end of text");
    const auto c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          return uint32_t{'\n'};
        case 'r':
          return uint32_t{'\r'};
        case 't':
          return uint32_t{'\t'};
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        case '\\':
        case '"':
        case '\'':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          return static_cast<uint32_t>(e);
        default:
          --pos_;
          return error("unknown escape");
      }
    }
    // A UTF-8 encoded character of the grammar text.
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + n > src_.size()) return error("invalid UTF-8");
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int i = 1; i < n; ++i) {
      const auto cc = static_cast<unsigned char>(src_[pos_ + i]);
      if ((cc & 0xC0) != 0x80) return error("invalid UTF-8");
      cp = (cp << 6) | (cc & 0x3F);
    }
    pos_ += n;
    return cp;
  }

  Result<std::vector<Elem>> parse_literal() {
    ++pos_;
    std::vector<Elem> seq;
    while (peek() != '"') {
      if (eof()) return error("unterminated string literal");
      KEEL_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
      for (char byte : encode_utf8(cp)) seq.push_back(b_.byte(static_cast<uint8_t>(byte)));
    }
    ++pos_;
    return seq;
  }

  Result<std::vector<Elem>> parse_class() {
    ++pos_;
    const bool negated = peek() == '^';
    if (negated) ++pos_;
    Ranges ranges;
    while (peek() != ']') {
      if (eof()) return error("unterminated character class");
      KEEL_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']') {
        ++pos_;
        KEEL_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error("character range out of order");
      }
      ranges.emplace_back(lo, hi);
    }
    ++pos_;
    if (negated) ranges = complement(std::move(ranges));
    return class_elems(ranges);
  }

  static Ranges complement(Ranges r) {
    std::sort(r.begin(), r.end());
    Ranges out;
    uint32_t next = 0;
    for (auto [lo, hi] : r) {
      if (lo > next) out.emplace_back(next, lo - 1);
      next = std::max(next, hi + 1);
    }
    if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
    return out;
  }

 public:
  // Elements matching one character from `ranges` (code points).
  Result<std::vector<Elem>> class_elems(const Ranges& ranges) {
    ByteSet ascii;
    std::vector<Utf8Sequence> seqs;
    for (auto [lo, hi] : ranges) {
      if (lo < 0x80)
        ascii.set_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(std::min(hi, 0x7Fu)));
      if (hi >= 0x80) utf8_sequences(std::max(lo, 0x80u), hi, &seqs);
    }
    if (seqs.empty() && ascii.empty()) return error("empty character class");
    if (seqs.empty()) return std::vector<Elem>{b_.bytes(ascii)};
    const uint32_t rule = anon_rule();
    if (!ascii.empty()) b_.add_alt(rule, {b_.bytes(ascii)});
    for (const Utf8Sequence& s : seqs) {
      std::vector<Elem> alt;
      for (auto [lo, hi] : s) {
        ByteSet set;
        set.set_range(lo, hi);
        alt.push_back(b_.bytes(set));
      }
      b_.add_alt(rule, alt);
    }
    return std::vector<Elem>{GrammarBuilder::ref(rule)};
  }

 private:
  Result<int> parse_count() {
    int v = 0;
    if (!(peek() >= '0' && peek() <= '9')) return error("expected a number");
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      ++pos_;
      if (v > kMaxRepetition)
        return error(fmt::format("repetition count above {}", kMaxRepetition));
    }
    return v;
  }

  Result<std::vector<Elem>> parse_repetition(const std::vector<Elem>& item) {
    int min = 0, max = -1;
    const char op = peek();
    ++pos_;
    if (op == '+') min = 1;
    if (op == '?') max = 1;
    if (op == '{') {
      skip_space();
      KEEL_ASSIGN_OR_RETURN(min, parse_count());
      skip_space();
      max = min;
      if (peek() == ',') {
        ++pos_;
        skip_space();
        max = -1;
        if (peek() != '}') {
          KEEL_ASSIGN_OR_RETURN(max, parse_count());
        }
        skip_space();
      }
      if (peek() != '}') return error("expected `}`");
      ++pos_;
      if (max >= 0 && max < min) return error("repetition {m,n} with n < m");
    }
    return repeat(item, min, max);
  }

 public:
  // item{min,max} (max −1: unbounded) as elements, with helper rules.
  std::vector<Elem> repeat(const std::vector<Elem>& item, int min, int max) {
    Elem x = item.size() == 1 ? item[0] : Elem{};
    if (item.size() != 1) {
      const uint32_t wrap = anon_rule();
      b_.add_alt(wrap, item);
      x = GrammarBuilder::ref(wrap);
    }
    std::vector<Elem> seq(static_cast<size_t>(min), x);
    if (max < 0) {
      const uint32_t star = anon_rule();
      b_.add_alt(star, {x, GrammarBuilder::ref(star)});
      b_.add_alt(star, {});
      seq.push_back(GrammarBuilder::ref(star));
    } else if (max > min) {
      uint32_t inner = anon_rule();  // x | ε
      b_.add_alt(inner, {x});
      b_.add_alt(inner, {});
      for (int k = 1; k < max - min; ++k) {  // x inner | ε
        const uint32_t outer = anon_rule();
        b_.add_alt(outer, {x, GrammarBuilder::ref(inner)});
        b_.add_alt(outer, {});
        inner = outer;
      }
      seq.push_back(GrammarBuilder::ref(inner));
    }
    return seq;
  }

 private:
  std::string_view src_;
  size_t pos_ = 0;
  GrammarBuilder b_;
  std::map<std::string, uint32_t> ids_;
  std::set<uint32_t> defined_;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text) { return Parser(text).run(); }

}  // namespace keel::grammar
