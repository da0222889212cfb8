// UTF-8 byte-range sequences for code point ranges (utf8_ranges.h).
#include "grammar/utf8_ranges.h"

namespace keel::grammar {
namespace {

constexpr uint32_t kMaxOfLength[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};

int encoded_length(uint32_t cp) {
  for (int n = 0; n < 4; ++n) {
    if (cp <= kMaxOfLength[n]) return n + 1;
  }
  return 4;
}

// [lo, hi] encodes with the same length, no surrogates.
void same_length(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out) {
  const int n = encoded_length(lo);
  // Split until lo and hi differ only in a suffix of whole continuation bytes that runs from all
  // zeros to all ones: then each byte position is an independent range.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        same_length(lo, lo | m, out);
        same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        same_length(lo, (hi & ~m) - 1, out);
        same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  const std::string a = encode_utf8(lo);
  const std::string b = encode_utf8(hi);
  Utf8Sequence seq;
  for (size_t k = 0; k < a.size(); ++k) {
    seq.emplace_back(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k]));
  }
  out->push_back(std::move(seq));
}

}  // namespace

std::string encode_utf8(uint32_t cp) {
  if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<Utf8Sequence>* out) {
  if (hi > kMaxCodePoint) hi = kMaxCodePoint;
  if (lo > hi) return;
  if (lo < 0xD800 && hi > 0xDFFF) {
    utf8_sequences(lo, 0xD7FF, out);
    utf8_sequences(0xE000, hi, out);
    return;
  }
  if (lo >= 0xD800 && lo <= 0xDFFF) lo = 0xE000;
  if (hi >= 0xD800 && hi <= 0xDFFF) hi = 0xD7FF;
  if (lo > hi) return;
  for (int n = 0; n < 4; ++n) {
    const uint32_t max = kMaxOfLength[n];
    if (lo <= max && hi > max) {
      same_length(lo, max, out);
      utf8_sequences(max + 1, hi, out);
      return;
    }
  }
  same_length(lo, hi, out);
}

}  // namespace keel::grammar
