// Intersection of regular languages given as GBNF grammars, for the JSON Schema string keywords
// that constrain the same string together: `format` with `pattern`, either with minLength /
// maxLength, and a pattern's leading lookaheads ((?=X) / (?!X) right after ^).
// Method: the product of the operands' matchers (matcher.h), explored byte by byte from the start.
// A StackSet is the set of every parse of the input so far, i.e. a deterministic state, so the
// tuple of the operands' (canonicalised) StackSets is one state of a DFA for the intersection.
// States that cannot reach acceptance are pruned, then one rule per state is written: byte
// classes to the next states, and "" where all operands accept. Only ASCII bytes are explored (a
// non-ASCII character is never generated here: a valid subset); left recursion cannot arise (every
// alternative starts with a byte) and every rule written can finish.
// Operands must be regular (right recursion only, as formats and regexes compile); others, or a
// product with more than `max_states` states, are refused.
// Thread safety: pure functions writing into the caller's RuleWriter.
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "grammar/rule_writer.h"

namespace keel::grammar {

inline constexpr size_t kMaxProductStates = 20000;

struct RegularOperand {
  enum class Kind {
    kMatch,       // the text matches the grammar
    kNoPrefix,    // no prefix of the text matches the grammar ((?!X) at the start)
    kSomePrefix,  // some prefix of the text matches the grammar ((?=X) at the start)
    kNoMatch,     // the text does not match the grammar ((?!X$) at the start)
  };
  std::string gbnf;  // a complete grammar, start rule `root`
  Kind kind = Kind::kMatch;
};

// A GBNF expression for the texts every operand admits (rules added to `w`); InvalidArgument
// when the intersection is empty or too large.
Result<std::string> intersect_regular(RuleWriter& w, const std::vector<RegularOperand>& ops,
                                      size_t max_states = kMaxProductStates);

}  // namespace keel::grammar
