// StopMatcher (see stop_matcher.h): streaming KMP over each stop string; the held-back tail is the
// longest suffix of the stream that is still a proper prefix of some stop string.
#include "tokenizer/stop_matcher.h"

#include <algorithm>

namespace keel::tokenizer {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (size_t i = 0; i < stops.size(); ++i) {
    if (stops[i].empty()) continue;
    Automaton a;
    a.pattern = std::move(stops[i]);
    a.index = i;
    const std::string& p = a.pattern;
    a.fail.assign(p.size(), 0);
    size_t k = 0;
    for (size_t j = 1; j < p.size(); ++j) {
      while (k > 0 && p[j] != p[k]) k = a.fail[k - 1];
      if (p[j] == p[k]) ++k;
      a.fail[j] = k;
    }
    automata_.push_back(std::move(a));
  }
}

StopMatcher::Output StopMatcher::push(std::string_view text) {
  Output out;
  if (matched_) return out;
  const size_t base = held_.size();
  held_.append(text);
  for (size_t j = 0; j < text.size(); ++j) {
    const char c = text[j];
    const Automaton* done = nullptr;
    for (Automaton& a : automata_) {
      while (a.state > 0 && a.pattern[a.state] != c) a.state = a.fail[a.state - 1];
      if (a.pattern[a.state] == c) ++a.state;
      if (a.state == a.pattern.size() &&
          (done == nullptr || a.pattern.size() > done->pattern.size())) {
        done = &a;
      }
    }
    if (done != nullptr) {
      const size_t end = base + j + 1;  // one past the stop string's last byte, in held_
      out.text = held_.substr(0, end - done->pattern.size());
      out.match = done->index;
      held_.clear();
      matched_ = true;
      return out;
    }
  }
  size_t hold = 0;
  for (const Automaton& a : automata_) hold = std::max(hold, a.state);
  hold = std::min(hold, held_.size());
  out.text = held_.substr(0, held_.size() - hold);
  held_.erase(0, held_.size() - hold);
  return out;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  for (Automaton& a : automata_) a.state = 0;
  if (matched_) out.clear();
  return out;
}

}  // namespace keel::tokenizer
