// The GPT-2 byte-level alphabet: a bijection between the 256 byte values and 256 printable code
// points, so that byte-level BPE vocabularies store every byte string as printable text. Bytes
// '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to themselves; the other 68 bytes map, in increasing
// order, to U+0100..U+0143 (so ' ' is "Ġ" U+0120 and '\n' is "Ċ" U+010A).
//
// Thread safety: pure functions over constant tables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace keel::tokenizer {

// The code point that stands for byte `b`.
uint32_t byte_to_code_point(uint8_t b);
// The byte that code point `cp` stands for, or nullopt when `cp` is outside the alphabet.
std::optional<uint8_t> code_point_to_byte(uint32_t cp);

// Appends the byte-level encoding of every byte of `bytes` to `out` (UTF-8).
void byte_level_encode(std::string_view bytes, std::string* out);

// Maps byte-level text back to bytes, like llama.cpp's decoder: a code point outside the alphabet
// becomes "[UNK_BYTE_0x<hex of its UTF-8>" followed by the whole `text` and "]".
std::string byte_level_decode(std::string_view text);

}  // namespace keel::tokenizer
