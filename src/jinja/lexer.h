// Lexer: Jinja2 template source -> a flat token stream (text runs, tag delimiters and the
// expression tokens inside tags), applying whitespace control exactly as Jinja2's lexer does:
// `{%-`/`-%}` (and `{{-`, `-}}`, `{#-`, `-#}`) strip all adjacent whitespace, `{%+`/`+%}` keep it,
// trim_blocks drops the first newline after a block or comment tag, lstrip_blocks drops spaces
// and tabs before a block or comment tag that starts a line. Comments vanish; `{% raw %}` blocks
// become text. Newlines are normalized to "\n" and one trailing newline of the source is dropped
// (keep_trailing_newline = false).
//
// Thread safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::jinja {

enum class TokenKind {
  kText,        // literal template text (text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier or keyword (text)
  kString,      // string literal, escapes resolved (text)
  kInt,         // integer literal (int_value)
  kFloat,       // float literal (float_value)
  kOperator,    // + - * / // % ** ~ == != < <= > >= = ( ) [ ] { } , . : | ; (text)
  kEnd,         // end of the template
};

struct Token {
  TokenKind kind = TokenKind::kEnd;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in bytes
};

struct LexOptions {
  bool trim_blocks = true;  // Hugging Face renders chat templates with both enabled
  bool lstrip_blocks = true;
  size_t max_tokens = 1 << 20;  // longer token streams are refused (OutOfRange)
};

// Errors: InvalidArgument "line L, column C: ..." for an unterminated tag, comment or string, an
// unexpected character or an unbalanced bracket.
Result<std::vector<Token>> tokenize(std::string_view source, const LexOptions& options);

}  // namespace keel::jinja
