// GBNF-style grammar text → Grammar (grammar.h). The dialect (llama.cpp's GBNF):
//   name ::= alternative ("|" alternative)*        rules; the start rule is `root`
//   "literal"   [a-z0-9_]   [^"\\]   .             literals, character classes, any character
//   name   ( ... )                                 rule references, groups
//   x*  x+  x?  x{m}  x{m,}  x{m,n}                repetition
//   # comment to the end of the line
// Escapes in literals and classes: \n \r \t \\ \" \' \[ \] \- \^ \/ \xHH \uHHHH \UHHHHHHHH.
// Characters are Unicode scalar values matched as their UTF-8 bytes. Whitespace (newlines
// included) separates elements; a rule ends where the next `name ::=` starts.
// Errors: InvalidArgument with the byte offset and what was expected; undefined rules, missing
// `root`, left recursion and rules that can never finish are named.
// Thread safety: a pure function.
#pragma once

#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace keel::grammar {

// Repetition counts above this are refused ({m,n} expands to m + (n − m) elements).
inline constexpr int kMaxRepetition = 4096;

Result<Grammar> parse_gbnf(std::string_view text);

}  // namespace keel::grammar
