// Unicode code point ranges as UTF-8 byte-range sequences: the set of encodings of [lo, hi] is
// the union of a few sequences, each a product of byte ranges ([E1-EC][80-BF][80-BF], ...). A
// byte-level grammar accepts exactly the valid UTF-8 encodings of a character class by taking one
// alternative per sequence. Surrogates (U+D800..U+DFFF) are never encoded.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace keel::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// One inclusive byte range per encoded byte.
using Utf8Sequence = std::vector<std::pair<uint8_t, uint8_t>>;

// Appends sequences that together encode exactly the scalar values in [lo, hi] (lo <= hi).
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out);

// The UTF-8 encoding of a scalar value (surrogates and values above kMaxCodePoint encode as
// U+FFFD).
std::string encode_utf8(uint32_t cp);

}  // namespace keel::grammar
