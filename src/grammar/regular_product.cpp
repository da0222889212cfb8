// intersect_regular (regular_product.h): breadth-first product exploration, pruning, emission.
#include "grammar/regular_product.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <span>
#include <unordered_map>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace keel::grammar {
namespace {

using Kind = RegularOperand::Kind;

// A prefix operand that has decided: kNoPrefix can no longer match, kSomePrefix has matched.
struct OperandState {
  StackSet set;
  bool done = false;
};

struct State {
  std::vector<OperandState> ops;
  bool accepting = false;
};

// The set's stacks in sorted order, as bytes (equal sets, equal keys, whatever the order).
void append_canonical(const StackSet& s, std::string* key) {
  std::vector<std::span<const uint32_t>> stacks;
  stacks.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) stacks.push_back(s.stack(i));
  std::sort(stacks.begin(), stacks.end(), [](const auto& a, const auto& b) {
    return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end());
  });
  for (const auto& st : stacks) {
    key->append(reinterpret_cast<const char*>(st.data()), st.size() * sizeof(uint32_t));
    key->push_back('|');
  }
}

class Product {
 public:
  Product(const std::vector<RegularOperand>& ops, std::vector<Grammar> grammars)
      : ops_(ops), g_(std::move(grammars)) {
    // Bytes that every byte set of every operand treats alike step alike: one representative
    // per class is stepped (a few dozen classes instead of 128 bytes).
    std::map<std::vector<bool>, std::vector<uint8_t>> by_signature;
    for (int b = 0; b < 0x80; ++b) {
      std::vector<bool> sig;
      for (const Grammar& g : g_) {
        for (const ByteSet& s : g.sets) sig.push_back(s.test(static_cast<uint8_t>(b)));
      }
      by_signature[sig].push_back(static_cast<uint8_t>(b));
    }
    for (auto& [sig, bytes] : by_signature) classes_.push_back(std::move(bytes));
  }

  // Settles prefix operands; false when the state is dead.
  bool settle(State* s) const {
    for (size_t i = 0; i < ops_.size(); ++i) {
      OperandState& o = s->ops[i];
      if (o.done) continue;
      switch (ops_[i].kind) {
        case Kind::kMatch:
          if (o.set.empty()) return false;
          break;
        case Kind::kNoPrefix:
          if (o.set.has_complete()) return false;
          if (o.set.empty()) o.done = true;
          break;
        case Kind::kSomePrefix:
          if (o.set.has_complete()) o.done = true;
          if (!o.done && o.set.empty()) return false;
          break;
        case Kind::kNoMatch:
          if (o.set.empty()) o.done = true;
          break;
      }
      if (o.done) o.set.clear();
    }
    s->accepting = true;
    for (size_t i = 0; i < ops_.size(); ++i) {
      const OperandState& o = s->ops[i];
      if (ops_[i].kind == Kind::kMatch && !o.set.has_complete()) s->accepting = false;
      if (ops_[i].kind == Kind::kSomePrefix && !o.done) s->accepting = false;
      if (ops_[i].kind == Kind::kNoMatch && !o.done && o.set.has_complete()) s->accepting = false;
    }
    return true;
  }

  static std::string key(const State& s) {
    std::string k;
    for (const OperandState& o : s.ops) {
      if (o.done) {
        k += 'D';
      } else {
        append_canonical(o.set, &k);
      }
      k += '#';
    }
    return k;
  }

  Status explore(size_t max_states) {
    State start;
    for (const Grammar& g : g_) start.ops.push_back({initial_state(g), false});
    if (!settle(&start)) return Status::invalid_argument("no string satisfies all of them");
    add(start);
    for (size_t at = 0; at < states_.size(); ++at) {
      const ByteSet next_bytes = candidates(states_[at]);
      for (const std::vector<uint8_t>& cls : classes_) {
        const uint8_t b = cls[0];
        if (!next_bytes.test(b)) continue;
        State next;
        next.ops.resize(ops_.size());
        for (size_t i = 0; i < ops_.size(); ++i) {
          if (states_[at].ops[i].done) {
            next.ops[i].done = true;
            continue;
          }
          step(g_[i], states_[at].ops[i].set, b, &next.ops[i].set);
        }
        if (!settle(&next)) continue;
        const int to = add(std::move(next));
        if (states_.size() > max_states) {
          return Status::invalid_argument(
              fmt::format("their combination needs more than {} grammar states", max_states));
        }
        for (uint8_t member : cls) edges_[at].emplace_back(member, to);
      }
      std::sort(edges_[at].begin(), edges_[at].end());
    }
    return Status();
  }

  // Writes the live states' rules; the start rule's name.
  Result<std::string> emit(RuleWriter& w) const {
    const size_t n = states_.size();
    std::vector<std::vector<int>> back(n);
    for (size_t s = 0; s < n; ++s) {
      for (const auto& [b, to] : edges_[s])
        back[static_cast<size_t>(to)].push_back(static_cast<int>(s));
    }
    std::vector<char> live(n, 0);
    std::vector<int> work;
    for (size_t s = 0; s < n; ++s) {
      if (states_[s].accepting) {
        live[s] = 1;
        work.push_back(static_cast<int>(s));
      }
    }
    while (!work.empty()) {
      const int s = work.back();
      work.pop_back();
      for (int p : back[static_cast<size_t>(s)]) {
        if (!live[static_cast<size_t>(p)]) {
          live[static_cast<size_t>(p)] = 1;
          work.push_back(p);
        }
      }
    }
    if (!live[0]) return Status::invalid_argument("no string satisfies all of them");
    const std::string base = w.fresh("and");
    auto name = [&](int s) { return fmt::format("{}-{}", base, s); };
    for (size_t s = 0; s < n; ++s) {
      if (!live[s]) continue;
      std::map<int, std::string> by_target;  // target → its bytes as class contents
      for (size_t e = 0; e < edges_[s].size(); ++e) {
        const auto [b, to] = edges_[s][e];
        if (!live[static_cast<size_t>(to)]) continue;
        // A run of consecutive bytes to the same target is one range.
        size_t last = e;
        while (last + 1 < edges_[s].size() && edges_[s][last + 1].second == to &&
               edges_[s][last + 1].first == edges_[s][last].first + 1) {
          ++last;
        }
        by_target[to] += fmt::format("\\x{:02X}", b);
        if (last > e) by_target[to] += fmt::format("-\\x{:02X}", edges_[s][last].first);
        e = last;
      }
      std::string alts = states_[s].accepting ? "\"\"" : "";
      for (const auto& [to, cls] : by_target) {
        alts += fmt::format("{}[{}] {}", alts.empty() ? "" : " | ", cls, name(to));
      }
      w.define(name(static_cast<int>(s)), alts);
    }
    return name(0);
  }

 private:
  // The bytes the first undecided kMatch operand accepts next (every byte if none).
  ByteSet candidates(const State& s) const {
    ByteSet out;
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (ops_[i].kind != Kind::kMatch || s.ops[i].done) continue;
      const StackSet& set = s.ops[i].set;
      for (size_t k = 0; k < set.size(); ++k) {
        if (set.stack(k).empty()) continue;
        const ByteSet& top = g_[i].sets[g_[i].elems[set.stack(k).back()].arg];
        for (int w = 0; w < 4; ++w) out.bits[w] |= top.bits[w];
      }
      return out;
    }
    out.set_range(0, 0x7F);
    return out;
  }

  int add(State s) {
    std::string k = key(s);
    if (auto it = ids_.find(k); it != ids_.end()) return it->second;
    const int id = static_cast<int>(states_.size());
    ids_.emplace(std::move(k), id);
    states_.push_back(std::move(s));
    edges_.emplace_back();
    return id;
  }

  const std::vector<RegularOperand>& ops_;
  std::vector<Grammar> g_;
  std::vector<std::vector<uint8_t>> classes_;  // ASCII bytes no operand tells apart
  std::vector<State> states_;
  std::vector<std::vector<std::pair<uint8_t, int>>> edges_;
  std::unordered_map<std::string, int> ids_;
};

}  // namespace

Result<std::string> intersect_regular(RuleWriter& w, const std::vector<RegularOperand>& ops,
                                      size_t max_states) {
  std::vector<Grammar> grammars;
  for (const RegularOperand& op : ops) {
    KEEL_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(op.gbnf));
    grammars.push_back(std::move(g));
  }
  Product p(ops, std::move(grammars));
  KEEL_TRY(p.explore(max_states));
  return p.emit(w);
}

}  // namespace keel::grammar
