// UTF-8 helpers: llama.cpp-compatible lenient decoding (for regex input), encoding, and the
// streaming sanitizer that replaces maximal ill-formed subparts with U+FFFD (see utf8.h for the
// exact rules).
// Thread safety: free functions are pure; a Utf8Sanitizer has one owner.
#include "tokenizer/utf8.h"

namespace keel::tokenizer {

size_t utf8_sequence_length(uint8_t lead) {
  static constexpr uint8_t kLengths[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLengths[lead >> 4];
}

namespace {

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

// Decodes one code point at text[*pos] with llama.cpp's lenient rules; returns U+FFFD and advances
// one byte when the sequence is malformed.
uint32_t decode_lenient(std::string_view text, size_t* pos) {
  const auto at = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  const size_t i = *pos;
  const uint8_t b0 = at(i);
  size_t len = 0;
  uint32_t cp = 0;
  if (b0 < 0x80) {
    len = 1;
    cp = b0;
  } else if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  }
  if (len == 0 || i + len > text.size()) {
    *pos = i + 1;
    return kReplacementChar;
  }
  for (size_t k = 1; k < len; ++k) {
    if (!is_continuation(at(i + k))) {
      *pos = i + 1;
      return kReplacementChar;
    }
    cp = (cp << 6) | (at(i + k) & 0x3F);
  }
  *pos = i + len;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return kReplacementChar;
  return cp;
}

}  // namespace

std::string normalize_utf8_lenient(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const uint8_t b = static_cast<uint8_t>(text[pos]);
    if (b < 0x80) {  // fast path
      out.push_back(static_cast<char>(b));
      ++pos;
      continue;
    }
    append_utf8(decode_lenient(text, &pos), &out);
  }
  return out;
}

void Utf8Sanitizer::push_byte(uint8_t b, std::string* out) {
  if (num_pending_ > 0) {
    if (b >= next_lo_ && b <= next_hi_) {
      pending_[num_pending_++] = static_cast<char>(b);
      next_lo_ = 0x80;
      next_hi_ = 0xBF;
      if (num_pending_ == num_needed_) {
        out->append(pending_, num_pending_);
        num_pending_ = 0;
      }
      return;
    }
    // The held bytes are a maximal ill-formed subpart; `b` starts afresh.
    out->append(kReplacementUtf8);
    num_pending_ = 0;
  }
  if (b < 0x80) {
    out->push_back(static_cast<char>(b));
    return;
  }
  next_lo_ = 0x80;
  next_hi_ = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    num_needed_ = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    num_needed_ = 3;
    if (b == 0xE0) next_lo_ = 0xA0;
    if (b == 0xED) next_hi_ = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    num_needed_ = 4;
    if (b == 0xF0) next_lo_ = 0x90;
    if (b == 0xF4) next_hi_ = 0x8F;
  } else {
    out->append(kReplacementUtf8);  // 0x80-0xC1, 0xF5-0xFF can never start a sequence
    return;
  }
  pending_[0] = static_cast<char>(b);
  num_pending_ = 1;
}

void Utf8Sanitizer::push(std::string_view bytes, std::string* out) {
  for (char c : bytes) push_byte(static_cast<uint8_t>(c), out);
}

void Utf8Sanitizer::finish(std::string* out) {
  if (num_pending_ > 0) out->append(kReplacementUtf8);
  num_pending_ = 0;
}

bool is_valid_utf8(std::string_view text) {
  Utf8Sanitizer s;
  std::string out;
  s.push(text, &out);
  return !s.has_pending() && out == text;
}

std::string sanitize_utf8(std::string_view bytes) {
  Utf8Sanitizer s;
  std::string out;
  out.reserve(bytes.size());
  s.push(bytes, &out);
  s.finish(&out);
  return out;
}

}  // namespace keel::tokenizer
