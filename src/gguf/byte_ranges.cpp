// ByteRange set operations: sort and merge, then sweep.
#include "gguf/byte_ranges.h"

#include <algorithm>

namespace keel::gguf {

std::vector<ByteRange> normalize_ranges(std::vector<ByteRange> ranges) {
  std::erase_if(ranges, [](const ByteRange& r) { return r.bytes == 0; });
  std::sort(ranges.begin(), ranges.end(),
            [](const ByteRange& a, const ByteRange& b) { return a.offset < b.offset; });
  std::vector<ByteRange> out;
  for (const ByteRange& r : ranges) {
    if (!out.empty() && r.offset <= out.back().end()) {
      out.back().bytes = std::max(out.back().end(), r.end()) - out.back().offset;
    } else {
      out.push_back(r);
    }
  }
  return out;
}

std::vector<ByteRange> subtract_ranges(const std::vector<ByteRange>& from,
                                       const std::vector<ByteRange>& minus) {
  const std::vector<ByteRange> a = normalize_ranges(from);
  const std::vector<ByteRange> b = normalize_ranges(minus);
  std::vector<ByteRange> out;
  size_t j = 0;  // first range of b that may still overlap the current part of a
  for (const ByteRange& r : a) {
    uint64_t at = r.offset;
    while (j < b.size() && b[j].end() <= at) ++j;
    for (size_t k = j; k < b.size() && b[k].offset < r.end(); ++k) {
      if (b[k].offset > at) out.push_back({at, b[k].offset - at});
      at = std::max(at, b[k].end());
    }
    if (at < r.end()) out.push_back({at, r.end() - at});
  }
  return out;
}

std::vector<ByteRange> complement_ranges(const std::vector<ByteRange>& ranges, uint64_t size) {
  if (size == 0) return {};
  return subtract_ranges({{0, size}}, ranges);
}

uint64_t total_bytes(const std::vector<ByteRange>& ranges) {
  uint64_t n = 0;
  for (const ByteRange& r : ranges) n += r.bytes;
  return n;
}

}  // namespace keel::gguf
