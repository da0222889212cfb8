// Lexer implementation: a scan for the next tag opener, whitespace control on the text before
// it, then expression tokens until the matching closer (closers inside open brackets do not
// count, as in Jinja2).
#include "jinja/lexer.h"

#include <algorithm>
#include <charconv>
#include <cstring>

#include "core/utf8.h"

namespace keel::jinja {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string src, const LexOptions& options) : src_(std::move(src)), options_(options) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Result<std::vector<Token>> run() {
    size_t pos = 0;
    bool line_starting = true;
    while (pos < src_.size()) {
      size_t open = find_opener(pos);
      std::string text = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        KEEL_TRY(emit_text(std::move(text), pos));
        break;
      }
      char kind = src_[open + 1];
      char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        while (!text.empty() && is_space(text.back())) text.pop_back();
      } else if (modifier != '+' && options_.lstrip_blocks && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if ((l_pos > 0 || line_starting) &&
            std::all_of(text.begin() + static_cast<ptrdiff_t>(l_pos), text.end(), is_space)) {
          text.resize(l_pos);
        }
      }
      KEEL_TRY(emit_text(std::move(text), pos));
      size_t body = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      size_t end = 0;
      if (kind == '#') {
        KEEL_ASSIGN_OR_RETURN(end, lex_comment(open, body));
      } else if (kind == '%' && is_raw_tag(body, &end)) {
        KEEL_ASSIGN_OR_RETURN(end, lex_raw(open, end));
      } else {
        KEEL_ASSIGN_OR_RETURN(end, lex_tag(open, body, kind == '%'));
      }
      line_starting = end > 0 && src_[end - 1] == '\n';
      pos = end;
    }
    tokens_.push_back(make(TokenKind::kEnd, src_.size()));
    return std::move(tokens_);
  }

 private:
  size_t find_opener(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return src_.size();
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  Token make(TokenKind kind, size_t offset) const {
    Token t;
    t.kind = kind;
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    size_t line_idx = static_cast<size_t>(it - line_starts_.begin()) - 1;
    t.line = static_cast<int>(line_idx + 1);
    t.column = static_cast<int>(offset - line_starts_[line_idx] + 1);
    return t;
  }

  Status error_at(size_t offset, const std::string& msg) const {
    Token t = make(TokenKind::kEnd, offset);
    return Status::invalid_argument("line " + std::to_string(t.line) + ", column " +
                                    std::to_string(t.column) + ": " + msg);
  }

  Status push(Token t, size_t offset) {
    if (tokens_.size() >= options_.max_tokens) {
      return Status::out_of_range("template has more than " + std::to_string(options_.max_tokens) +
                                  " tokens");
    }
    (void)offset;
    tokens_.push_back(std::move(t));
    return Status();
  }

  Status emit_text(std::string text, size_t offset) {
    if (text.empty()) return Status();
    Token t = make(TokenKind::kText, offset);
    t.text = std::move(text);
    return push(std::move(t), offset);
  }

  // After a closer ending at `pos`: "-" closers eat all whitespace, plain block/comment closers
  // eat one newline with trim_blocks.
  size_t after_closer(size_t pos, char modifier, bool is_block_or_comment) const {
    if (modifier == '-') {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
    } else if (modifier != '+' && is_block_or_comment && options_.trim_blocks &&
               pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    return pos;
  }

  Result<size_t> lex_comment(size_t open, size_t body) {
    size_t close = src_.find("#}", body);
    if (close == std::string::npos) return error_at(open, "unterminated comment");
    char modifier =
        close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : '\0';
    return after_closer(close + 2, modifier, true);
  }

  // True when the block tag at `body` is `raw`; sets *end to the offset after its closer.
  bool is_raw_tag(size_t body, size_t* end) const {
    size_t p = body;
    while (p < src_.size() && is_space(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return false;
    p += 3;
    while (p < src_.size() && is_space(src_[p])) ++p;
    char modifier = '\0';
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) modifier = src_[p++];
    if (src_.compare(p, 2, "%}") != 0) return false;
    *end = after_closer(p + 2, modifier, true);
    return true;
  }

  // Text up to `{% endraw %}`; returns the offset after the endraw closer.
  Result<size_t> lex_raw(size_t open, size_t content) {
    size_t search = content;
    while (true) {
      size_t p = src_.find("{%", search);
      if (p == std::string::npos) return error_at(open, "unterminated raw block");
      size_t q = p + 2;
      char open_mod = q < src_.size() ? src_[q] : '\0';
      if (open_mod == '-' || open_mod == '+') ++q;
      while (q < src_.size() && is_space(src_[q])) ++q;
      if (src_.compare(q, 6, "endraw") == 0) {
        q += 6;
        while (q < src_.size() && is_space(src_[q])) ++q;
        char modifier = '\0';
        if (q < src_.size() && (src_[q] == '-' || src_[q] == '+')) modifier = src_[q++];
        if (src_.compare(q, 2, "%}") == 0) {
          std::string text = src_.substr(content, p - content);
          if (open_mod == '-') {
            while (!text.empty() && is_space(text.back())) text.pop_back();
          }
          KEEL_TRY(emit_text(std::move(text), content));
          return after_closer(q + 2, modifier, true);
        }
      }
      search = p + 2;
    }
  }

  Result<size_t> lex_tag(size_t open, size_t pos, bool is_block) {
    KEEL_TRY(push(make(is_block ? TokenKind::kBlockBegin : TokenKind::kVarBegin, open), open));
    std::string brackets;  // open ( [ { awaiting their closers
    const char closer = is_block ? '%' : '}';
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size()) {
        return error_at(open, std::string("unterminated ") + (is_block ? "'{%'" : "'{{'") +
                                  " tag (expected '" + closer + "}')");
      }
      if (brackets.empty()) {
        char modifier = '\0';
        size_t p = pos;
        if (src_[p] == '-' || (is_block && src_[p] == '+')) modifier = src_[p++];
        if (src_.compare(p, 2, std::string(1, closer) + "}") == 0) {
          KEEL_TRY(push(make(is_block ? TokenKind::kBlockEnd : TokenKind::kVarEnd, pos), pos));
          return after_closer(p + 2, modifier, is_block);
        }
      }
      KEEL_ASSIGN_OR_RETURN(pos, lex_expression_token(pos, &brackets));
    }
  }

  Result<size_t> lex_expression_token(size_t pos, std::string* brackets) {
    char c = src_[pos];
    if (is_name_start(c)) {
      size_t end = pos;
      while (end < src_.size() && is_name_char(src_[end])) ++end;
      Token t = make(TokenKind::kName, pos);
      t.text = src_.substr(pos, end - pos);
      KEEL_TRY(push(std::move(t), pos));
      return end;
    }
    if (is_digit(c)) return lex_number(pos);
    if (c == '\'' || c == '"') return lex_string(pos);
    static constexpr const char* kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos, 2, op) == 0) {
        Token t = make(TokenKind::kOperator, pos);
        t.text = op;
        KEEL_TRY(push(std::move(t), pos));
        return pos + 2;
      }
    }
    if (std::strchr("+-*/%~<>=()[]{},.:|;", c) == nullptr || c == '\0') {
      return error_at(pos, std::string("unexpected character '") + c + "' in tag");
    }
    if (c == '(' || c == '[' || c == '{') brackets->push_back(c);
    if (c == ')' || c == ']' || c == '}') {
      char want = c == ')' ? '(' : (c == ']' ? '[' : '{');
      if (brackets->empty()) return error_at(pos, std::string("unexpected '") + c + "'");
      if (brackets->back() != want) {
        char expected = brackets->back() == '(' ? ')' : (brackets->back() == '[' ? ']' : '}');
        return error_at(pos, std::string("unexpected '") + c + "', expected '" + expected + "'");
      }
      brackets->pop_back();
    }
    Token t = make(TokenKind::kOperator, pos);
    t.text = std::string(1, c);
    KEEL_TRY(push(std::move(t), pos));
    return pos + 1;
  }

  // Digits with optional '_' separators.
  size_t scan_digits(size_t pos) const {
    while (pos < src_.size() &&
           (is_digit(src_[pos]) ||
            (src_[pos] == '_' && pos + 1 < src_.size() && is_digit(src_[pos + 1])))) {
      ++pos;
    }
    return pos;
  }

  Result<size_t> lex_number(size_t pos) {
    size_t end = scan_digits(pos);
    bool is_float = false;
    bool after_dot = pos > 0 && src_[pos - 1] == '.';  // `x.0.1` is attribute access
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      end = scan_digits(end + 1);
      is_float = true;
    }
    if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t p = end + 1;
      if (p < src_.size() && (src_[p] == '+' || src_[p] == '-')) ++p;
      if (p < src_.size() && is_digit(src_[p])) {
        end = scan_digits(p);
        is_float = true;
      }
    }
    std::string digits;
    for (size_t i = pos; i < end; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    Token t = make(is_float ? TokenKind::kFloat : TokenKind::kInt, pos);
    t.text = digits;
    if (is_float) {
      auto res = std::from_chars(digits.data(), digits.data() + digits.size(), t.float_value);
      if (res.ec != std::errc()) return error_at(pos, "bad float literal '" + digits + "'");
    } else {
      auto res = std::from_chars(digits.data(), digits.data() + digits.size(), t.int_value);
      if (res.ec != std::errc()) return error_at(pos, "integer literal out of range: " + digits);
    }
    KEEL_TRY(push(std::move(t), pos));
    return end;
  }

  static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Python escapes: \\ \' \" \a \b \f \n \r \t \v \ooo \xhh \uXXXX \UXXXXXXXX, line
  // continuation; an unknown escape keeps its backslash. Returns the offset after the escape.
  Result<size_t> read_escape(size_t pos, std::string* out) {
    char e = src_[pos];
    switch (e) {
      case '\n':
        return pos + 1;
      case '\\':
        *out += '\\';
        return pos + 1;
      case '\'':
        *out += '\'';
        return pos + 1;
      case '"':
        *out += '"';
        return pos + 1;
      case 'a':
        *out += '\a';
        return pos + 1;
      case 'b':
        *out += '\b';
        return pos + 1;
      case 'f':
        *out += '\f';
        return pos + 1;
      case 'n':
        *out += '\n';
        return pos + 1;
      case 'r':
        *out += '\r';
        return pos + 1;
      case 't':
        *out += '\t';
        return pos + 1;
      case 'v':
        *out += '\v';
        return pos + 1;
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      uint32_t cp = 0;
      size_t p = pos;
      while (p < pos + 3 && p < src_.size() && src_[p] >= '0' && src_[p] <= '7') {
        cp = cp * 8 + static_cast<uint32_t>(src_[p++] - '0');
      }
      append_utf8(cp, out);
      return p;
    }
    int width = e == 'x' ? 2 : (e == 'u' ? 4 : (e == 'U' ? 8 : 0));
    if (width == 0) {
      *out += '\\';
      return pos;  // the character itself is copied by the caller
    }
    uint32_t cp = 0;
    for (int i = 1; i <= width; ++i) {
      int h = pos + static_cast<size_t>(i) < src_.size() ? hex_value(src_[pos + i]) : -1;
      if (h < 0) return error_at(pos - 1, std::string("truncated \\") + e + " escape");
      cp = cp * 16 + static_cast<uint32_t>(h);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = kReplacementCodePoint;
    append_utf8(cp, out);
    return pos + 1 + static_cast<size_t>(width);
  }

  Result<size_t> lex_string(size_t start) {
    char quote = src_[start];
    std::string value;
    size_t pos = start + 1;
    while (true) {
      if (pos >= src_.size()) return error_at(start, "unterminated string literal");
      char c = src_[pos];
      if (c == quote) break;
      if (c == '\\' && pos + 1 < src_.size()) {
        KEEL_ASSIGN_OR_RETURN(pos, read_escape(pos + 1, &value));
        continue;
      }
      value += c;
      ++pos;
    }
    Token t = make(TokenKind::kString, start);
    t.text = std::move(value);
    KEEL_TRY(push(std::move(t), start));
    return pos + 1;
  }

  std::string src_;
  LexOptions options_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source, const LexOptions& options) {
  Lexer lexer(normalize_source(source), options);
  return lexer.run();
}

}  // namespace keel::jinja
