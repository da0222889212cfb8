// GPT-2 byte-level alphabet: the byte <-> code point tables are built at compile time; encoding
// and decoding are table lookups (see byte_level.h for the mapping and llama.cpp's decoding of
// code points outside the alphabet).
// Thread safety: constant tables, pure functions.
#include "tokenizer/byte_level.h"

#include <array>
#include <cstdio>

#include "tokenizer/utf8.h"

namespace keel::tokenizer {
namespace {

constexpr bool maps_to_itself(int b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint32_t, 256> make_byte_to_cp() {
  std::array<uint32_t, 256> table{};
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) table[b] = maps_to_itself(b) ? static_cast<uint32_t>(b) : next++;
  return table;
}

constexpr std::array<uint32_t, 256> kByteToCp = make_byte_to_cp();
constexpr uint32_t kAlphabetEnd = 256 + 68;  // one past the largest code point in the alphabet

constexpr std::array<int16_t, kAlphabetEnd> make_cp_to_byte() {
  std::array<int16_t, kAlphabetEnd> table{};
  for (auto& v : table) v = -1;
  for (int b = 0; b < 256; ++b) table[kByteToCp[b]] = static_cast<int16_t>(b);
  return table;
}

constexpr std::array<int16_t, kAlphabetEnd> kCpToByte = make_cp_to_byte();
static_assert(kByteToCp[' '] == 0x120 && kByteToCp['\n'] == 0x10A);

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return kByteToCp[b]; }

std::optional<uint8_t> code_point_to_byte(uint32_t cp) {
  if (cp >= kAlphabetEnd || kCpToByte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(kCpToByte[cp]);
}

void byte_level_encode(std::string_view bytes, std::string* out) {
  for (char c : bytes) append_utf8(kByteToCp[static_cast<uint8_t>(c)], out);
}

std::string byte_level_decode(std::string_view text) {
  const std::string normalized = normalize_utf8_lenient(text);
  std::string out;
  out.reserve(normalized.size());
  size_t pos = 0;
  while (pos < normalized.size()) {
    const size_t len = utf8_sequence_length(static_cast<uint8_t>(normalized[pos]));
    const std::string_view unit(normalized.data() + pos, len);
    pos += len;
    uint32_t cp = static_cast<uint8_t>(unit[0]);
    if (len > 1) {
      cp &= 0xFF >> (len + 1);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(unit[k]) & 0x3F);
    }
    if (auto b = code_point_to_byte(cp)) {
      out.push_back(static_cast<char>(*b));
      continue;
    }
    out += "[UNK_BYTE_0x";
    for (char c : unit) {
      char hex[3];
      std::snprintf(hex, sizeof(hex), "%02x", static_cast<uint8_t>(c));
      out += hex;
    }
    out.append(text);
    out += "]";
  }
  return out;
}

}  // namespace keel::tokenizer
