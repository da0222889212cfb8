// TokenMasker: which vocabulary tokens a grammar state allows next — a token is allowed when the
// matcher accepts all of its bytes from some stack of the state (and, under a token budget, the
// state after it can still be completed in time, see below). End-of-generation tokens are allowed
// exactly when the state is complete.
//
// How it is fast (the idea of the adaptive token-mask cache of XGrammar, arXiv:2411.15100):
//  1. Local entries. For a stack, only its top kLocalFrames frames decide most tokens: walking the
//     token trie from that sub-stack alone, a token either matches entirely inside it (allowed in
//     every context), fails inside it (rejected in every context), or finishes the sub-stack with
//     bytes left over ("context-dependent"). An entry keeps the first kind as a bitset and lists
//     the third, which are checked against the full stack at mask time (a handful: tokens that
//     close a string or an object and go on). Entries are built once per distinct sub-stack.
//  2. State cache. The mask of a whole state (a StackSet) is cached by the state; JSON generation
//     revisits the same states (every character inside one string), so most steps are one lookup.
// Budget: min_remaining() is the fewest bytes that complete a stack. With `left` tokens still
// allowed (this one included), a non-EOG token is allowed only if the best state after it needs
// at most left − 2 bytes: then every later step can make one byte of progress with a single-byte
// token and still leave a token for EOG. The local entry records, per allowed token, how much it
// changes the sub-stack's min_remaining (context-independent), so budgets are applied without
// re-walking. If a budget leaves nothing allowed, the unbudgeted mask is used.
//
// Thread safety: not thread-safe (it fills caches); use from one thread at a time. The grammar
// and trie it borrows are immutable and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace keel::grammar {

// A bitset over the vocabulary: bit t of word t / 64.
using TokenBits = std::vector<uint64_t>;
inline bool test_bit(const TokenBits& b, int32_t t) { return (b[t >> 6] >> (t & 63)) & 1; }
inline void set_bit(TokenBits& b, int32_t t) { b[t >> 6] |= uint64_t{1} << (t & 63); }
inline void clear_bit(TokenBits& b, int32_t t) { b[t >> 6] &= ~(uint64_t{1} << (t & 63)); }

// Top frames of a stack that key a local entry.
inline constexpr size_t kLocalFrames = 3;

struct MaskerStats {
  int64_t masks = 0;             // compute() calls
  int64_t state_hits = 0;        // served from the state cache
  int64_t entries_built = 0;     // local entries built (trie walks)
  int64_t dependent_checks = 0;  // context-dependent subtrees walked from a full stack
};

class TokenMasker {
 public:
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie);

  // The tokens allowed after `state` with `left` tokens still to generate (this one included;
  // left ≤ 0 means no budget). *out is resized to the vocabulary.
  void compute(const StackSet& state, int64_t left, TokenBits* out);

  [[nodiscard]] const Grammar& grammar() const { return *grammar_; }
  [[nodiscard]] const TokenTrie& trie() const { return *trie_; }
  [[nodiscard]] const MaskerStats& stats() const { return stats_; }

 private:
  struct LocalEntry {
    TokenBits accept;                                // allowed in every context
    std::vector<std::pair<int32_t, int32_t>> delta;  // (token, change of min_remaining) when ≠ 0
    int32_t max_delta = 0;                           // over accepted tokens
    // Context-dependent tokens: the subtrees of these trie nodes (preorder), where the walk from
    // the sub-stack alone finished it with bytes left. Walked again from the full stack.
    std::vector<uint32_t> dependent_roots;
  };
  struct CachedState {
    StackSet state;
    TokenBits bits;
    int64_t max_after = 0;  // the largest min_remaining after an allowed token
  };
  struct VecHash {
    size_t operator()(const std::vector<uint32_t>& v) const;
  };

  const LocalEntry& entry(std::span<const uint32_t> key);
  LocalEntry build_entry(std::span<const uint32_t> key);
  // The mask under byte budget `budget` (the most bytes a state after the token may need);
  // returns the largest min_remaining after an allowed non-EOG token.
  int64_t compute_budgeted(const StackSet& state, int64_t budget, TokenBits* out);
  void add_stack(std::span<const uint32_t> s, int64_t budget, TokenBits* out, int64_t* max_after);
  // Walks e's dependent subtrees from the full stack s, allowing what it accepts.
  void add_dependent(std::span<const uint32_t> s, const LocalEntry& e, int64_t budget,
                     TokenBits* out, int64_t* max_after);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  size_t words_;
  std::unordered_map<std::vector<uint32_t>, LocalEntry, VecHash> entries_;
  std::unordered_map<uint64_t, CachedState> states_;
  std::vector<StackSet> walk_;      // per trie depth, reused by build_entry
  std::vector<StackSet> dep_walk_;  // per relative depth, reused by add_dependent
  StackSet parent_;
  MaskerStats stats_;
};

}  // namespace keel::grammar
