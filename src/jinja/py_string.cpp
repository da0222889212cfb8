// Python str helpers (see py_string.h).
#include "jinja/py_string.h"

#include <algorithm>

namespace keel::jinja {
namespace {

// Decodes the code point at `pos` (one byte for invalid sequences); sets *len.
uint32_t decode_at(std::string_view s, size_t pos, size_t* len) {
  auto b = static_cast<uint8_t>(s[pos]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (n == 0 || pos + n > s.size()) {
    *len = 1;
    return b;
  }
  uint32_t cp = n == 1 ? b : (n == 2 ? b & 0x1F : (n == 3 ? b & 0x0F : b & 0x07));
  for (size_t i = 1; i < n; ++i) {
    auto c = static_cast<uint8_t>(s[pos + i]);
    if ((c & 0xC0) != 0x80) {
      *len = 1;
      return b;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  *len = n;
  return cp;
}

bool is_ascii_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::vector<size_t> codepoint_offsets(std::string_view s) {
  std::vector<size_t> out;
  out.reserve(s.size() + 1);
  size_t pos = 0;
  while (pos < s.size()) {
    out.push_back(pos);
    size_t len = 1;
    decode_at(s, pos, &len);
    pos += len;
  }
  out.push_back(s.size());
  return out;
}

size_t codepoint_count(std::string_view s) {
  size_t count = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t len = 1;
    decode_at(s, pos, &len);
    pos += len;
    ++count;
  }
  return count;
}

Result<std::vector<size_t>> slice_indices(size_t n, std::optional<int64_t> start,
                                          std::optional<int64_t> stop,
                                          std::optional<int64_t> step) {
  int64_t st = step.value_or(1);
  if (st == 0) return Status::invalid_argument("slice step cannot be zero");
  auto len = static_cast<int64_t>(n);
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) x += len;
    if (st > 0) return std::clamp<int64_t>(x, 0, len);
    return std::clamp<int64_t>(x, -1, len - 1);
  };
  int64_t lo = clamp(start, st > 0 ? 0 : len - 1);
  int64_t hi = clamp(stop, st > 0 ? len : -1);
  std::vector<size_t> out;
  // Counted, so that a huge step cannot overflow the index.
  uint64_t span = st > 0 ? (hi > lo ? static_cast<uint64_t>(hi - lo) : 0)
                         : (lo > hi ? static_cast<uint64_t>(lo - hi) : 0);
  uint64_t stride = st > 0 ? static_cast<uint64_t>(st) : static_cast<uint64_t>(-(st + 1)) + 1;
  uint64_t count = span == 0 ? 0 : (span - 1) / stride + 1;
  out.reserve(count);
  for (uint64_t k = 0; k < count; ++k) {
    uint64_t offset = k * stride;  // < span <= n
    out.push_back(static_cast<size_t>(st > 0 ? static_cast<uint64_t>(lo) + offset
                                             : static_cast<uint64_t>(lo) - offset));
  }
  return out;
}

bool py_isspace_char(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string py_strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                     bool right) {
  std::vector<uint32_t> strip_set;
  if (chars) {
    size_t pos = 0;
    while (pos < chars->size()) {
      size_t len = 1;
      strip_set.push_back(decode_at(*chars, pos, &len));
      pos += len;
    }
  }
  auto strips = [&](uint32_t cp) {
    if (!chars) return py_isspace_char(cp);
    return std::find(strip_set.begin(), strip_set.end(), cp) != strip_set.end();
  };
  std::vector<size_t> offsets = codepoint_offsets(s);
  size_t first = 0;
  size_t last = offsets.size() - 1;  // code point count
  auto cp_at = [&](size_t i) {
    size_t len = 1;
    return decode_at(s, offsets[i], &len);
  };
  if (left) {
    while (first < last && strips(cp_at(first))) ++first;
  }
  if (right) {
    while (last > first && strips(cp_at(last - 1))) --last;
  }
  return std::string(s.substr(offsets[first], offsets[last] - offsets[first]));
}

Result<std::vector<std::string>> py_split(std::string_view s, const std::optional<std::string>& sep,
                                          int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  if (sep && sep->empty()) return Status::invalid_argument("split: empty separator");
  uint64_t limit = maxsplit < 0 ? UINT64_MAX : static_cast<uint64_t>(maxsplit);
  if (sep) {
    if (!from_right) {
      size_t pos = 0;
      while (parts.size() < limit) {
        size_t hit = s.find(*sep, pos);
        if (hit == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, hit - pos));
        pos = hit + sep->size();
      }
      parts.emplace_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (parts.size() < limit && end >= sep->size()) {
      size_t hit = s.rfind(*sep, end - sep->size());
      if (hit == std::string_view::npos) break;
      parts.emplace_back(s.substr(hit + sep->size(), end - hit - sep->size()));
      end = hit;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  // Whitespace runs (ASCII whitespace; enough for templates).
  auto ws = [](char c) { return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F); };
  if (!from_right) {
    size_t pos = 0;
    while (true) {
      while (pos < s.size() && ws(s[pos])) ++pos;
      if (pos >= s.size()) break;
      if (parts.size() >= limit) {
        parts.emplace_back(s.substr(pos));  // Python keeps the remainder's trailing space
        break;
      }
      size_t end = pos;
      while (end < s.size() && !ws(s[end])) ++end;
      parts.emplace_back(s.substr(pos, end - pos));
      pos = end;
    }
    return parts;
  }
  size_t end = s.size();
  while (true) {
    while (end > 0 && ws(s[end - 1])) --end;
    if (end == 0) break;
    if (parts.size() >= limit) {
      parts.emplace_back(s.substr(0, end));  // Python keeps the remainder's leading space
      break;
    }
    size_t begin = end;
    while (begin > 0 && !ws(s[begin - 1])) --begin;
    parts.emplace_back(s.substr(begin, end - begin));
    end = begin;
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::string py_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    if (is_ascii_alpha(c)) {
      c = prev_cased ? py_lower(std::string(1, c))[0] : py_upper(std::string(1, c))[0];
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = py_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

}  // namespace keel::jinja
