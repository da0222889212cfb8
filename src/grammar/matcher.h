// The byte-level matcher: a pushdown recogniser over a Grammar. A parse state is a set of stacks
// (StackSet); a stack lists positions in Grammar::elems, bottom first: each frame is where an
// unfinished alternative continues, and the top is always a kBytes element (the next byte it
// needs). An empty stack means the root rule has matched completely. step() consumes one byte
// from every stack whose top accepts it and re-expands (rule references push their alternatives,
// finished alternatives pop), so a state is a plain value that is "rolled back" by keeping the old
// one. Left recursion is excluded by GrammarBuilder, so expansion always terminates.
//
// min_remaining(): the fewest bytes that complete a stack (sum of Grammar::rest_min over its
// frames); the budget-aware closing in token_constraint.h uses it.
// Thread safety: StackSet is a value; the functions are pure given the (immutable) grammar.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace keel::grammar {

class StackSet {
 public:
  StackSet() { begin_.push_back(0); }
  void clear() {
    data_.clear();
    begin_.assign(1, 0);
  }
  [[nodiscard]] size_t size() const { return begin_.size() - 1; }
  [[nodiscard]] bool empty() const { return size() == 0; }
  [[nodiscard]] std::span<const uint32_t> stack(size_t i) const {
    return {data_.data() + begin_[i], begin_[i + 1] - begin_[i]};
  }
  // Adds a stack unless an equal one is present.
  void add(std::span<const uint32_t> s);
  // True when some stack is empty (the input so far is a complete match).
  [[nodiscard]] bool has_complete() const;
  // A hash of the set (order-sensitive; add() keeps insertion order deterministic).
  [[nodiscard]] uint64_t hash() const;
  friend bool operator==(const StackSet& a, const StackSet& b) {
    return a.data_ == b.data_ && a.begin_ == b.begin_;
  }

 private:
  std::vector<uint32_t> data_;   // the stacks, concatenated
  std::vector<uint32_t> begin_;  // stack i is data_[begin_[i], begin_[i+1])
};

// Expands `stack` (whose top may be a reference or an alternative's end) into stacks whose tops
// are kBytes elements (or empty), added to *out. `scratch` is reused memory.
void expand(const Grammar& g, std::vector<uint32_t> stack, StackSet* out);

// The state before any input: the root rule's alternatives, expanded.
StackSet initial_state(const Grammar& g);

// Consumes byte b from every stack of `in` that accepts it; *out (cleared first) receives the
// expanded results. Empty when no stack accepts b.
void step(const Grammar& g, const StackSet& in, uint8_t b, StackSet* out);

// Consumes `bytes`; false (and *state unspecified) when some byte is rejected.
bool advance(const Grammar& g, std::string_view bytes, StackSet* state);

// Fewest bytes that complete the stack (0 for an empty stack).
uint32_t min_remaining(const Grammar& g, std::span<const uint32_t> stack);
// The minimum over the set's stacks (UINT32_MAX for an empty set).
uint32_t min_remaining(const Grammar& g, const StackSet& set);

}  // namespace keel::grammar
