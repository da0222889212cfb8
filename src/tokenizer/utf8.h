// UTF-8 helpers for the tokenizer: llama.cpp-compatible lenient decoding (used before regex
// pre-tokenization), code point encoding, and Utf8Sanitizer, a streaming validator that turns any
// byte stream into valid UTF-8.
//
// Invariant of Utf8Sanitizer: it never emits part of a code point. Valid input passes through
// unchanged; each maximal ill-formed subpart (Unicode 15, section 3.9, "U+FFFD substitution of
// maximal subparts") becomes one U+FFFD. Feeding a byte string in any split gives the same output.
//
// Thread safety: free functions are pure; a Utf8Sanitizer has one owner.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/utf8.h"  // append_utf8

namespace keel::tokenizer {

inline constexpr uint32_t kReplacementChar = 0xFFFD;
inline constexpr std::string_view kReplacementUtf8 = "\xEF\xBF\xBD";

// Length of the UTF-8 sequence announced by `lead`, judged by its high nibble only (as llama.cpp
// does): 1 for ASCII and stray continuation bytes, 2 for 0xC0-0xDF, 3 for 0xE0-0xEF, 4 for 0xF0+.
size_t utf8_sequence_length(uint8_t lead);

// Rewrites `text` into valid UTF-8 the way llama.cpp decodes text before regex splitting: a lead
// byte followed by the right number of continuation bytes is one code point (overlong forms are
// accepted and re-encoded shortest-form); anything else costs one byte and becomes U+FFFD.
// Surrogates and values above 0x10FFFF, which that decoder lets through, also become U+FFFD.
std::string normalize_utf8_lenient(std::string_view text);

// True when `text` is well-formed UTF-8.
bool is_valid_utf8(std::string_view text);

// Streaming UTF-8 repair (see the file comment).
class Utf8Sanitizer {
 public:
  // Appends to `out` every complete code point (or U+FFFD) that `bytes` completes.
  void push(std::string_view bytes, std::string* out);
  // Flushes an incomplete trailing sequence as U+FFFD and resets to the initial state.
  void finish(std::string* out);
  // True when bytes of an incomplete sequence are held back.
  [[nodiscard]] bool has_pending() const { return num_pending_ > 0; }

 private:
  void push_byte(uint8_t b, std::string* out);

  char pending_[4] = {};
  int num_pending_ = 0;  // bytes held of the current sequence
  int num_needed_ = 0;   // total length of the current sequence
  uint8_t next_lo_ = 0;  // allowed range of the next continuation byte
  uint8_t next_hi_ = 0;
};

// One-shot form of Utf8Sanitizer.
std::string sanitize_utf8(std::string_view bytes);

}  // namespace keel::tokenizer
