// TokenMasker (token_masker.h): local entries by trie walk, masks by state.
#include "grammar/token_masker.h"

#include <algorithm>
#include <limits>

namespace keel::grammar {
namespace {

constexpr size_t kMaxCachedStates = 1024;  // × vocab/8 bytes each (4 KiB at 32K)
constexpr size_t kMaxEntries = 1024;
constexpr int64_t kNoBudget = std::numeric_limits<int64_t>::max() / 4;

}  // namespace

size_t TokenMasker::VecHash::operator()(const std::vector<uint32_t>& v) const {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ull;
  return static_cast<size_t>(h);
}

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const TokenTrie> trie)
    : grammar_(std::move(grammar)),
      trie_(std::move(trie)),
      words_((static_cast<size_t>(trie_->vocab_size()) + 63) / 64),
      walk_(trie_->max_depth() + 1),
      dep_walk_(trie_->max_depth() + 1) {}

TokenMasker::LocalEntry TokenMasker::build_entry(std::span<const uint32_t> key) {
  ++stats_.entries_built;
  const Grammar& g = *grammar_;
  const std::vector<TrieNode>& nodes = trie_->nodes();
  LocalEntry e;
  e.accept.assign(words_, 0);
  e.max_delta = std::numeric_limits<int32_t>::min();
  const auto base = static_cast<int32_t>(min_remaining(g, key));
  std::vector<uint8_t> left_key(walk_.size(), 0);  // per depth: some path finished the key
  walk_[0].clear();
  walk_[0].add(key);
  for (size_t i = 0; i < nodes.size();) {
    const TrieNode& n = nodes[i];
    const size_t d = n.depth;
    const bool finished = left_key[d - 1] != 0 || walk_[d - 1].has_complete();
    step(g, walk_[d - 1], n.byte, &walk_[d]);
    if (walk_[d].empty()) {
      if (finished) e.dependent_roots.push_back(static_cast<uint32_t>(i));  // context decides
      i = n.next;
      continue;
    }
    left_key[d] = finished ? 1 : 0;
    if (n.tok_count > 0) {
      const int32_t delta = static_cast<int32_t>(min_remaining(g, walk_[d])) - base;
      for (int32_t t : trie_->tokens_at(n)) {
        set_bit(e.accept, t);
        if (delta != 0) e.delta.emplace_back(t, delta);
        e.max_delta = std::max(e.max_delta, delta);
      }
    }
    ++i;
  }
  return e;
}

const TokenMasker::LocalEntry& TokenMasker::entry(std::span<const uint32_t> key) {
  std::vector<uint32_t> k(key.begin(), key.end());
  auto it = entries_.find(k);
  if (it != entries_.end()) return it->second;
  if (entries_.size() >= kMaxEntries) entries_.clear();
  LocalEntry e = build_entry(key);
  return entries_.emplace(std::move(k), std::move(e)).first->second;
}

void TokenMasker::add_stack(std::span<const uint32_t> s, int64_t budget, TokenBits* out,
                            int64_t* max_after) {
  const Grammar& g = *grammar_;
  const size_t k = std::min(kLocalFrames, s.size());
  const LocalEntry& e = entry(s.subspan(s.size() - k));
  const int64_t m = min_remaining(g, s);
  const int64_t room = budget - m;  // the most min_remaining may grow
  if (e.max_delta != std::numeric_limits<int32_t>::min()) {
    if (room >= e.max_delta) {
      for (size_t w = 0; w < words_; ++w) (*out)[w] |= e.accept[w];
      *max_after = std::max(*max_after, m + e.max_delta);
    } else if (room >= 0) {  // all but the tokens that grow min_remaining too much
      TokenBits part = e.accept;
      for (auto [t, d] : e.delta) {
        if (d > room) clear_bit(part, t);
      }
      for (size_t w = 0; w < words_; ++w) (*out)[w] |= part[w];
    } else {  // only tokens that shrink it enough
      for (auto [t, d] : e.delta) {
        if (d <= room) set_bit(*out, t);
      }
    }
  }
  if (!e.dependent_roots.empty()) add_dependent(s, e, budget, out, max_after);
}

void TokenMasker::add_dependent(std::span<const uint32_t> s, const LocalEntry& e, int64_t budget,
                                TokenBits* out, int64_t* max_after) {
  const Grammar& g = *grammar_;
  const std::vector<TrieNode>& nodes = trie_->nodes();
  std::string_view parent_bytes;
  bool have_parent = false, parent_ok = false;
  for (uint32_t root : e.dependent_roots) {
    ++stats_.dependent_checks;
    const TrieNode& rn = nodes[root];
    uint32_t j = root;  // a token inside the subtree spells the bytes leading to it
    while (nodes[j].tok_count == 0) ++j;
    const std::string& piece = trie_->piece(trie_->tokens_at(nodes[j])[0]);
    const std::string_view prefix(piece.data(), rn.depth - 1u);
    if (!have_parent || prefix != parent_bytes) {  // consecutive roots often share a parent
      parent_bytes = prefix;
      have_parent = true;
      parent_.clear();
      parent_.add(s);
      parent_ok = advance(g, prefix, &parent_);
    }
    if (!parent_ok) continue;
    dep_walk_[0] = parent_;
    for (uint32_t i = root; i < rn.next;) {
      const TrieNode& n = nodes[i];
      const size_t d = n.depth - rn.depth + 1u;
      step(g, dep_walk_[d - 1], n.byte, &dep_walk_[d]);
      if (dep_walk_[d].empty()) {
        i = n.next;
        continue;
      }
      if (n.tok_count > 0) {
        const int64_t after = min_remaining(g, dep_walk_[d]);
        if (after <= budget) {
          for (int32_t t : trie_->tokens_at(n)) set_bit(*out, t);
          *max_after = std::max(*max_after, after);
        }
      }
      ++i;
    }
  }
}

int64_t TokenMasker::compute_budgeted(const StackSet& state, int64_t budget, TokenBits* out) {
  out->assign(words_, 0);
  int64_t max_after = std::numeric_limits<int64_t>::min();
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state.stack(i).empty()) add_stack(state.stack(i), budget, out, &max_after);
  }
  if (state.has_complete()) {
    for (int32_t t : trie_->eog()) set_bit(*out, t);
  }
  return max_after;
}

void TokenMasker::compute(const StackSet& state, int64_t left, TokenBits* out) {
  ++stats_.masks;
  const int64_t budget = left <= 0 ? kNoBudget : left - 2;
  const uint64_t h = state.hash();
  auto it = states_.find(h);
  if (it == states_.end() || !(it->second.state == state)) {
    if (states_.size() >= kMaxCachedStates) states_.clear();
    CachedState c;
    c.state = state;
    c.max_after = compute_budgeted(state, kNoBudget, &c.bits);
    it = states_.insert_or_assign(h, std::move(c)).first;
  } else {
    ++stats_.state_hits;
  }
  if (it->second.max_after <= budget) {
    *out = it->second.bits;
    return;
  }
  compute_budgeted(state, budget, out);
  for (uint64_t w : *out) {
    if (w != 0) return;
  }
  *out = it->second.bits;  // the budget cannot be met: fall back to the grammar alone
}

}  // namespace keel::grammar
