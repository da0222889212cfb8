// Grammar: keel's byte-level grammar IR — rules made of alternatives, each a sequence of elements
// that are either a byte set (one input byte from the set) or a reference to a rule. Every
// higher-level form (GBNF text with Unicode character classes, JSON Schema, regex) compiles to
// this; Unicode classes become alternatives of UTF-8 byte sequences (utf8_ranges.h), so the
// matcher only ever sees bytes.
//
// Layout: all alternatives live in one flat `elems` array, each terminated by a kEnd element; a
// position is an index into it. rule_alts[r] lists the start positions of rule r's alternatives.
// Invariants after GrammarBuilder::finish(): every rule has at least one alternative; every
// reference names an existing rule; no rule is left-recursive (directly, or through a nullable
// prefix) and every rule can finish; rest_min[p] is the fewest bytes that complete the
// alternative from position p (the budget-aware closing uses it).
// Thread safety: immutable after finish(); share freely.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace keel::grammar {

// 256 bits: which bytes an element accepts.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  [[nodiscard]] bool test(uint8_t b) const { return ((bits[b >> 6] >> (b & 63)) & 1) != 0; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  [[nodiscard]] bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  friend bool operator==(const ByteSet&, const ByteSet&) = default;
};

enum class ElemKind : uint8_t {
  kEnd,    // end of an alternative
  kBytes,  // one byte from sets[arg]
  kRef,    // rule arg
};

struct Elem {
  ElemKind kind = ElemKind::kEnd;
  uint32_t arg = 0;
  friend bool operator==(const Elem&, const Elem&) = default;
};

struct Grammar {
  std::vector<Elem> elems;                       // all alternatives, each ending with kEnd
  std::vector<ByteSet> sets;                     // byte sets referenced by kBytes elements
  std::vector<std::vector<uint32_t>> rule_alts;  // per rule: start positions of its alternatives
  std::vector<std::string> rule_names;           // per rule, for messages
  uint32_t root = 0;                             // the start rule
  std::vector<uint32_t> rule_min;                // per rule: fewest bytes of a match
  std::vector<uint32_t> rest_min;                // per position: fewest bytes to its kEnd

  [[nodiscard]] size_t num_rules() const { return rule_alts.size(); }
};

// Builds a Grammar rule by rule. Rules may be referenced before they are defined (by id).
class GrammarBuilder {
 public:
  // A new rule without alternatives yet; names need not be unique (they are for messages).
  uint32_t add_rule(std::string name);
  // Appends an alternative (a sequence of kBytes / kRef elements; empty = ε) to rule `rule`.
  void add_alt(uint32_t rule, const std::vector<Elem>& seq);
  // The element for one byte from `set` (byte sets are shared when equal).
  Elem bytes(const ByteSet& set);
  Elem byte(uint8_t b);
  static Elem ref(uint32_t rule) { return {ElemKind::kRef, rule}; }
  [[nodiscard]] size_t num_rules() const { return alts_.size(); }

  // Checks the invariants of grammar.h and computes the minimum lengths. InvalidArgument naming
  // the rule for a rule without alternatives, a left-recursive rule or one that cannot finish.
  Result<Grammar> finish(uint32_t root) &&;

 private:
  std::vector<std::vector<std::vector<Elem>>> alts_;  // per rule, per alternative
  std::vector<std::string> names_;
  std::vector<ByteSet> sets_;
};

}  // namespace keel::grammar
