// GrammarBuilder: checks a grammar's invariants and flattens it (grammar.h).
#include "grammar/grammar.h"

#include <fmt/format.h>

#include <limits>

namespace keel::grammar {
namespace {

constexpr uint32_t kInfinite = std::numeric_limits<uint32_t>::max();

uint32_t add_saturating(uint32_t a, uint32_t b) {
  return (a == kInfinite || b == kInfinite || a + b < a) ? kInfinite : a + b;
}

using Alts = std::vector<std::vector<std::vector<Elem>>>;

// Fewest bytes each rule can match (kInfinite if it never finishes), by fixed point.
std::vector<uint32_t> rule_min_lengths(const Alts& alts) {
  std::vector<uint32_t> min(alts.size(), kInfinite);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < alts.size(); ++r) {
      for (const auto& seq : alts[r]) {
        uint32_t len = 0;
        for (const Elem& e : seq) {
          len = add_saturating(len, e.kind == ElemKind::kBytes ? 1 : min[e.arg]);
        }
        if (len < min[r]) {
          min[r] = len;
          changed = true;
        }
      }
    }
  }
  return min;
}

// A rule that can reach itself through references at nullable-prefix positions, or -1.
int64_t find_left_recursion(const Alts& alts, const std::vector<uint32_t>& min) {
  const size_t n = alts.size();
  std::vector<std::vector<uint32_t>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& seq : alts[r]) {
      for (const Elem& e : seq) {
        if (e.kind == ElemKind::kBytes) break;
        edges[r].push_back(e.arg);
        if (min[e.arg] != 0) break;
      }
    }
  }
  std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
  std::vector<std::pair<uint32_t, size_t>> path;
  for (size_t start = 0; start < n; ++start) {
    if (color[start] != 0) continue;
    path.emplace_back(static_cast<uint32_t>(start), 0);
    color[start] = 1;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = 2;
        path.pop_back();
        continue;
      }
      const uint32_t s = edges[r][next++];
      if (color[s] == 1) return s;
      if (color[s] == 0) {
        color[s] = 1;
        path.emplace_back(s, 0);
      }
    }
  }
  return -1;
}

}  // namespace

uint32_t GrammarBuilder::add_rule(std::string name) {
  alts_.emplace_back();
  names_.push_back(std::move(name));
  return static_cast<uint32_t>(alts_.size() - 1);
}

void GrammarBuilder::add_alt(uint32_t rule, const std::vector<Elem>& seq) {
  KEEL_CHECK(rule < alts_.size());
  alts_[rule].push_back(seq);
}

Elem GrammarBuilder::bytes(const ByteSet& set) {
  for (size_t i = 0; i < sets_.size(); ++i) {
    if (sets_[i] == set) return {ElemKind::kBytes, static_cast<uint32_t>(i)};
  }
  sets_.push_back(set);
  return {ElemKind::kBytes, static_cast<uint32_t>(sets_.size() - 1)};
}

Elem GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Result<Grammar> GrammarBuilder::finish(uint32_t root) && {
  if (root >= alts_.size()) return Status::invalid_argument("grammar has no root rule");
  for (size_t r = 0; r < alts_.size(); ++r) {
    if (alts_[r].empty()) {
      return Status::invalid_argument(fmt::format("grammar rule `{}` is undefined", names_[r]));
    }
    for (const auto& seq : alts_[r]) {
      for (const Elem& e : seq) {
        KEEL_CHECK(e.kind == ElemKind::kBytes ? e.arg < sets_.size() : e.arg < alts_.size());
      }
    }
  }
  Grammar g;
  g.rule_min = rule_min_lengths(alts_);
  for (size_t r = 0; r < alts_.size(); ++r) {
    if (g.rule_min[r] == kInfinite) {
      return Status::invalid_argument(fmt::format(
          "grammar rule `{}` can never finish (it always refers to itself)", names_[r]));
    }
  }
  if (int64_t r = find_left_recursion(alts_, g.rule_min); r >= 0) {
    return Status::invalid_argument(
        fmt::format("grammar rule `{}` is left-recursive, which keel does not support", names_[r]));
  }
  g.rule_alts.resize(alts_.size());
  for (size_t r = 0; r < alts_.size(); ++r) {
    for (const auto& seq : alts_[r]) {
      g.rule_alts[r].push_back(static_cast<uint32_t>(g.elems.size()));
      g.elems.insert(g.elems.end(), seq.begin(), seq.end());
      g.elems.push_back(Elem{});
    }
  }
  g.rest_min.assign(g.elems.size(), 0);
  for (size_t p = g.elems.size(); p-- > 0;) {
    const Elem& e = g.elems[p];
    if (e.kind == ElemKind::kEnd) continue;
    const uint32_t own = e.kind == ElemKind::kBytes ? 1 : g.rule_min[e.arg];
    g.rest_min[p] = add_saturating(own, g.rest_min[p + 1]);
  }
  g.sets = std::move(sets_);
  g.rule_names = std::move(names_);
  g.root = root;
  return g;
}

}  // namespace keel::grammar
