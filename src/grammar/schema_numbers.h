// The numeric keywords of JSON Schema as grammar: minimum, maximum, exclusiveMinimum,
// exclusiveMaximum (numbers, or draft-4 booleans), multipleOf, and the number formats int32 /
// int64 / float / double. Everything is decided by the grammar while decoding:
//   - integers: digit-by-digit range grammars (digit_ranges.h), any bounds, negative too;
//     exclusive bounds move by one; without a bound a side stops at ±(2^53 − 1). multipleOf k
//     (after taking out its powers of ten, which become trailing zeros) runs a residue
//     automaton of k states, so k (so reduced) must be at most kMaxModulus.
//   - numbers with bounds: an integer-part range plus fraction digits constrained at the bound
//     values, no exponent, at most 15 significant digits — so the double a client parses keeps
//     every bound, exclusive ones included (two decimals of ≤ 15 digits never share a double).
//   - numbers with multipleOf c·10^-j: the integer N = x·10^j is a multiple of c in the scaled
//     bounds, printed with exactly j fraction digits ("2.50"); an integral multipleOf gives
//     integers. Exact decimal arithmetic decides membership, as JSON Schema defines it; a
//     validator that divides doubles (ajv's default) can disagree (0.07 / 0.01 in doubles is
//     7.000000000000001).
// Bounds that leave no value, a multipleOf that is not a positive number, or one whose reduced
// modulus is too large are InvalidArgument naming the keyword.
// Thread safety: pure functions writing into the caller's RuleWriter.
#pragma once

#include <string>

#include "core/result.h"
#include "grammar/json_schema.h"
#include "grammar/rule_writer.h"

namespace keel::grammar {

// True when `s` uses any keyword number_expr() handles beyond `type`.
bool has_numeric_keywords(const SchemaJson& s);

// A GBNF expression for the integers (integer = true) or numbers valid under the numeric
// keywords of `s`; the shared primitives json-integer / json-number when it has none.
Result<std::string> number_expr(RuleWriter& w, const SchemaJson& s, bool integer);

}  // namespace keel::grammar
