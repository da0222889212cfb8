// Regular expression → GBNF expression (gbnf_parser.h), for keel's `regex` request field and JSON
// Schema `pattern`. The match is always of the whole text (^ and $ are accepted at the ends only).
// Supported: literals, ., [...] and [^...] with ranges, \d \w \s \D \W \S (also inside classes),
// escapes (\n \r \t \f \v \xHH \uHHHH and escaped punctuation), groups (...) and (?:...),
// alternation |, quantifiers * + ? {m} {m,} {m,n} (a trailing lazy ? is accepted, and ignored).
// Refused with InvalidArgument naming the construct: backreferences, lookaround, anchors inside,
// word boundaries, possessive quantifiers, named groups. regex_parts() also accepts lookaheads
// (?=X) / (?!X) at the start of the pattern (right after ^) and returns them apart: the caller
// intersects (regular_product.h).
// json_string: the expression describes the contents of a JSON string: characters are emitted
// JSON-escaped (a `"` as \"), and classes and `.` never produce control characters, `"` or `\`.
// Thread safety: a pure function.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace keel::grammar {

Result<std::string> regex_to_gbnf(std::string_view pattern, bool json_string);

struct RegexParts {
  struct Lookahead {
    bool negative = false;      // (?!X): no prefix of the text matches X; (?=X): some prefix does
    bool anchored_end = false;  // X ended with $: the whole text (does not) match X
    std::string expr;           // X as a GBNF expression
  };
  std::string expr;  // the rest of the pattern, matched against the whole text
  std::vector<Lookahead> lookaheads;
  bool anchored_start = false;  // the pattern began with ^
  bool anchored_end = false;    // the pattern ended with $
};
Result<RegexParts> regex_parts(std::string_view pattern, bool json_string);

// Whether `pattern` finds a match in `text` (JSON Schema's search semantics: an unanchored end
// allows any text there), run by the grammar matcher — linear in the text, no backtracking.
// nullopt when the pattern is outside the subset (lookaheads included).
std::optional<bool> regex_search(std::string_view pattern, std::string_view text);

// A full grammar (root rule `root`) of the texts matching `pattern`.
Result<std::string> regex_grammar(std::string_view pattern);

}  // namespace keel::grammar
