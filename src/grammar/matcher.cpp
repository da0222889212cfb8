// The byte-level pushdown matcher (matcher.h).
#include "grammar/matcher.h"

#include <algorithm>
#include <limits>

namespace keel::grammar {

void StackSet::add(std::span<const uint32_t> s) {
  for (size_t i = 0; i < size(); ++i) {
    std::span<const uint32_t> t = stack(i);
    if (t.size() == s.size() && std::equal(t.begin(), t.end(), s.begin())) return;
  }
  data_.insert(data_.end(), s.begin(), s.end());
  begin_.push_back(static_cast<uint32_t>(data_.size()));
}

bool StackSet::has_complete() const {
  for (size_t i = 0; i < size(); ++i) {
    if (begin_[i] == begin_[i + 1]) return true;
  }
  return false;
}

uint64_t StackSet::hash() const {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  auto mix = [&h](uint64_t v) { h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2); };
  for (uint32_t v : data_) mix(v);
  for (uint32_t v : begin_) mix(v);
  return h;
}

void expand(const Grammar& g, std::vector<uint32_t> stack, StackSet* out) {
  while (!stack.empty()) {
    const uint32_t pos = stack.back();
    const Elem& e = g.elems[pos];
    if (e.kind == ElemKind::kBytes) break;
    if (e.kind == ElemKind::kEnd) {
      stack.pop_back();
      continue;
    }
    // A reference: continue after it (dropping the frame when nothing follows), then try each
    // alternative of the rule on top.
    if (g.elems[pos + 1].kind == ElemKind::kEnd) {
      stack.pop_back();
    } else {
      stack.back() = pos + 1;
    }
    const std::vector<uint32_t>& alts = g.rule_alts[e.arg];
    for (size_t i = 0; i + 1 < alts.size(); ++i) {
      std::vector<uint32_t> branch = stack;
      branch.push_back(alts[i]);
      expand(g, std::move(branch), out);
    }
    stack.push_back(alts.back());
  }
  out->add(stack);
}

StackSet initial_state(const Grammar& g) {
  StackSet s;
  for (uint32_t alt : g.rule_alts[g.root]) expand(g, {alt}, &s);
  return s;
}

void step(const Grammar& g, const StackSet& in, uint8_t b, StackSet* out) {
  out->clear();
  std::vector<uint32_t> next;
  for (size_t i = 0; i < in.size(); ++i) {
    std::span<const uint32_t> s = in.stack(i);
    if (s.empty()) continue;
    const Elem& top = g.elems[s.back()];
    if (!g.sets[top.arg].test(b)) continue;
    next.assign(s.begin(), s.end());
    next.back() += 1;
    expand(g, next, out);
  }
}

bool advance(const Grammar& g, std::string_view bytes, StackSet* state) {
  StackSet next;
  for (char c : bytes) {
    step(g, *state, static_cast<uint8_t>(c), &next);
    if (next.empty()) return false;
    std::swap(*state, next);
  }
  return true;
}

uint32_t min_remaining(const Grammar& g, std::span<const uint32_t> stack) {
  uint64_t sum = 0;
  for (uint32_t pos : stack) sum += g.rest_min[pos];
  return static_cast<uint32_t>(std::min<uint64_t>(sum, std::numeric_limits<uint32_t>::max()));
}

uint32_t min_remaining(const Grammar& g, const StackSet& set) {
  uint32_t best = std::numeric_limits<uint32_t>::max();
  for (size_t i = 0; i < set.size(); ++i) best = std::min(best, min_remaining(g, set.stack(i)));
  return best;
}

}  // namespace keel::grammar
