// char_bounds (grammar_bounds.h): shortest path by fixpoint, longest by depth-first search
// (a rule met again on the current path makes the bound unbounded).
#include "grammar/grammar_bounds.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace keel::grammar {
namespace {

constexpr uint32_t kInf = std::numeric_limits<uint32_t>::max();

bool continuation_only(const ByteSet& s) {
  for (int b = 0; b < 256; ++b) {
    if (s.test(static_cast<uint8_t>(b)) && (b < 0x80 || b > 0xBF)) return false;
  }
  return true;
}

uint32_t sat_add(uint32_t a, uint32_t b) { return a > kInf - b ? kInf : a + b; }

class Bounds {
 public:
  explicit Bounds(const Grammar& g) : g_(g), max_(g.num_rules(), kUnknown) {
    for (const ByteSet& s : g.sets) {
      const bool cont = continuation_only(s);
      weight_max_.push_back(cont ? 0 : 1);
      weight_min_.push_back(cont || s.test('\\') ? 0 : 1);
    }
  }

  uint32_t min_of(uint32_t rule) {
    std::vector<uint32_t> m(g_.num_rules(), kInf);
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < g_.num_rules(); ++r) {
        for (uint32_t p : g_.rule_alts[r]) {
          uint32_t sum = 0;
          for (; g_.elems[p].kind != ElemKind::kEnd; ++p) {
            const Elem& e = g_.elems[p];
            sum = sat_add(sum, e.kind == ElemKind::kBytes ? weight_min_[e.arg] : m[e.arg]);
          }
          if (sum < m[r]) {
            m[r] = sum;
            changed = true;
          }
        }
      }
    }
    return m[rule];
  }

  // kInf when unbounded.
  uint32_t max_of(uint32_t rule) {
    if (max_[rule] == kOnPath) return kInf;
    if (max_[rule] != kUnknown) return max_[rule];
    max_[rule] = kOnPath;
    uint32_t best = 0;
    for (uint32_t p : g_.rule_alts[rule]) {
      uint32_t sum = 0;
      for (; g_.elems[p].kind != ElemKind::kEnd; ++p) {
        const Elem& e = g_.elems[p];
        sum = sat_add(sum, e.kind == ElemKind::kBytes ? weight_max_[e.arg] : max_of(e.arg));
      }
      best = std::max(best, sum);
    }
    max_[rule] = best;
    return best;
  }

 private:
  static constexpr uint32_t kUnknown = kInf - 1;
  static constexpr uint32_t kOnPath = kInf - 2;
  const Grammar& g_;
  std::vector<uint32_t> max_;
  std::vector<uint32_t> weight_max_, weight_min_;
};

}  // namespace

CharBounds char_bounds(const Grammar& g, uint32_t rule) {
  Bounds b(g);
  CharBounds out;
  out.min = b.min_of(rule);
  const uint32_t max = b.max_of(rule);
  if (max < kInf - 2) out.max = max;
  return out;
}

}  // namespace keel::grammar
