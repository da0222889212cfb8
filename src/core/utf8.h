// UTF-8 encoding of one code point: the primitive both the tokenizer (byte-level vocabularies,
// lenient decoding) and the Jinja engine (string escapes) build on. Decoding, validation and
// repair are the tokenizer's (tokenizer/utf8.h); Python str semantics are the Jinja engine's.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

namespace keel {

// U+FFFD, what an invalid or unencodable code point becomes.
inline constexpr uint32_t kReplacementCodePoint = 0xFFFD;

// Appends the UTF-8 encoding of `cp` (must be <= 0x10FFFF) to `out`.
inline void append_utf8(uint32_t cp, std::string* out) {
  if (cp <= 0x7F) {
    out->push_back(static_cast<char>(cp));
  } else if (cp <= 0x7FF) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp <= 0xFFFF) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace keel
