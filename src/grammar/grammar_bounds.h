// Character-length bounds of a grammar rule's texts, so that JSON Schema's minLength / maxLength
// can be checked against a `format` or `pattern` grammar: when every text the grammar makes
// already fits the lengths, the length keywords are honoured as they stand.
// Characters are counted on the IR's byte elements: a byte set of UTF-8 continuation bytes only
// counts 0, any other 1 (max); for min, a set that admits '\' also counts 0, so a JSON escape
// such as \" is one character at most. min is a lower bound and max an upper bound on the
// characters of every text (exact for ASCII grammars without escapes, such as the formats).
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "grammar/grammar.h"

namespace keel::grammar {

struct CharBounds {
  uint32_t min = 0;
  std::optional<uint32_t> max;  // nullopt: unbounded (the rule is recursive)
};

CharBounds char_bounds(const Grammar& g, uint32_t rule);

}  // namespace keel::grammar
