// TextSpans helpers (see text_span.h).
#include "jinja/text_span.h"

#include <algorithm>

#include "core/check.h"

namespace keel::jinja {

void append_span(TextSpans* spans, size_t begin, size_t end) {
  if (end <= begin) return;
  if (!spans->empty()) {
    KEEL_CHECK(spans->back().end <= begin);
    if (spans->back().end == begin) {
      spans->back().end = end;
      return;
    }
  }
  spans->push_back({begin, end});
}

void append_spans(TextSpans* dst, const TextSpans& src, size_t begin, size_t end, size_t offset) {
  // The first span that ends after `begin`.
  auto it = std::upper_bound(src.begin(), src.end(), begin,
                             [](size_t pos, const TextSpan& s) { return pos < s.end; });
  for (; it != src.end() && it->begin < end; ++it) {
    const size_t b = std::max(it->begin, begin);
    const size_t e = std::min(it->end, end);
    append_span(dst, b - begin + offset, e - begin + offset);
  }
}

bool overlaps(const TextSpans& spans, size_t begin, size_t end) {
  auto it = std::upper_bound(spans.begin(), spans.end(), begin,
                             [](size_t pos, const TextSpan& s) { return pos < s.end; });
  return it != spans.end() && it->begin < end;
}

TrackedText tracked_substr(const TrackedText& text, size_t begin, size_t end) {
  TrackedText out;
  out.text = text.text.substr(begin, end - begin);
  append_spans(&out.plain, text.plain, begin, end, 0);
  return out;
}

}  // namespace keel::jinja
