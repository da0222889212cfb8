// Parser: template source -> statement tree. Statements: if/elif/else, for (tuple targets,
// `if` filter, else), set (names, tuples, `ns.attr`, block form), macro, break/continue, and
// generation (Hugging Face's assistant-mask block, rendered as plain content). Anything else
// (include, import, extends, block, call, filter, with, recursive loops) is refused with an
// error naming the tag, its line and column.
//
// Thread safety: pure function.
#pragma once

#include <string_view>

#include "core/result.h"
#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace keel::jinja {

struct ParseOptions {
  LexOptions lex;
  int max_nesting = 64;  // deepest nesting of statements plus expressions accepted
};

// Errors: InvalidArgument "line L, column C: ..." for any syntax error; OutOfRange for a
// template past the lexer's token limit.
Result<NodeList> parse_template(std::string_view source, const ParseOptions& options);

}  // namespace keel::jinja
