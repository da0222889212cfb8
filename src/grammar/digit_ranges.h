// Digit-by-digit grammars of integer ranges: the decimal texts (no leading zeros) of the integers
// n in [lo, hi] that are multiples of a modulus, for JSON Schema's minimum / maximum /
// exclusiveMinimum / exclusiveMaximum / multipleOf. Each length of n gets its own piece: a
// "tight" chain of rules follows the digits of lo and hi, and below them the remaining digits are
// free — or, with a modulus k > 1, carried through a residue automaton (k states per remaining
// length: after digits with value v the state is v mod k; n is accepted in state 0). Every rule
// written can finish (dead residues are pruned), so the budget-aware closing always has a way out.
// Thread safety: pure functions writing into the caller's RuleWriter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/rule_writer.h"

namespace keel::grammar {

// Residue automata above this size are refused by the callers (k × 19 rules of up to 10 digits).
inline constexpr uint32_t kMaxModulus = 100;

struct DigitForm {
  uint32_t modulus = 1;  // only n ≡ 0 (mod modulus); 1 ≤ modulus ≤ kMaxModulus
  int32_t point = 0;     // print n / 10^point with exactly `point` fraction digits (5 → "0.05")
  int32_t zeros = 0;     // print n × 10^zeros: n ≠ 0 followed by `zeros` zeros (0 stays "0")
};

struct DigitPiece {
  int32_t length = 0;  // digits of n (1 for n = 0)
  std::string expr;    // GBNF expression of the texts of this length
};

// The pieces for n in [lo, hi] (lo ≤ hi, both < 10^19), by increasing length; empty when no n
// qualifies.
std::vector<DigitPiece> digit_range(RuleWriter& w, uint64_t lo, uint64_t hi, const DigitForm& form);

// `[0-9]` repeated n times as GBNF ("" for 0).
std::string any_digits(int64_t n);

}  // namespace keel::grammar
