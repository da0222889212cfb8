// StopMatcher: finds stop strings in a stream of text chunks, across chunk (token) boundaries,
// and says which text may be released now. Two users run it over the same detokenized stream:
// the engine, which decides that a request finishes (engine/stop_strings.h), and the server,
// which releases text to the client without ever showing a stop string. Text that could still be
// the beginning of a stop string is held back; a stop string itself is never released.
//
// Matching is byte-wise with one KMP automaton per stop string, so each byte costs O(1)
// amortized per stop string and the result does not depend on how the text was chunked. The
// first stop string to COMPLETE in the stream wins (among those completing on the same byte, the
// longest, i.e. the one starting first). Given valid UTF-8 input and stop strings, released text
// always ends on a character boundary.
//
// Thread safety: one owner.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace keel::tokenizer {

class StopMatcher {
 public:
  // Empty strings in `stops` are ignored.
  explicit StopMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;             // releasable now (before any matched stop string)
    std::optional<size_t> match;  // index into the constructor's `stops` of the matched string
  };
  // Feeds more text. After a match every later call returns nothing.
  Output push(std::string_view text);
  // End of the stream: releases whatever is held back (nothing after a match).
  std::string flush();

  [[nodiscard]] bool matched() const { return matched_; }
  [[nodiscard]] size_t held_bytes() const { return held_.size(); }

 private:
  struct Automaton {
    std::string pattern;
    std::vector<size_t> fail;  // KMP failure function: fail[i] = longest proper border of [0, i]
    size_t state = 0;          // bytes of `pattern` matched as a suffix of the stream
    size_t index = 0;          // position in the constructor's list
  };
  std::vector<Automaton> automata_;
  std::string held_;  // released text's continuation not yet released
  bool matched_ = false;
};

}  // namespace keel::tokenizer
