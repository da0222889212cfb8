// TextSpan and TrackedText: byte ranges of a text that came from untrusted input — chat message
// contents — as opposed to the template's own markup. The chat template renders a TrackedText
// (jinja/interpreter.h tracks where each output byte came from); the tokenizer then parses
// control tokens ("<|im_start|>", "</s>") only outside the plain spans, so that what a user
// writes is always tokenized as text (Tokenizer::encode with plain spans).
//
// Invariant of a TextSpans list: sorted by begin, non-empty, disjoint and not adjacent (merged),
// each inside its text. The helpers keep it.
//
// Thread safety: plain values and pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace keel::jinja {

struct TextSpan {
  size_t begin = 0;  // first byte
  size_t end = 0;    // one past the last byte (> begin)

  friend bool operator==(const TextSpan&, const TextSpan&) = default;
};
using TextSpans = std::vector<TextSpan>;

struct TrackedText {
  std::string text;
  TextSpans plain;  // the bytes of `text` that came from untrusted input
};

// Appends [begin, end) to `spans`, whose last span must end at or before `begin` (merged when
// adjacent); empty ranges are ignored.
void append_span(TextSpans* spans, size_t begin, size_t end);

// Appends the parts of `src` inside [begin, end), shifted so that `begin` lands at `offset`.
void append_spans(TextSpans* dst, const TextSpans& src, size_t begin, size_t end, size_t offset);

// True when [begin, end) overlaps any span.
[[nodiscard]] bool overlaps(const TextSpans& spans, size_t begin, size_t end);

// `text` with bytes [begin, end) only, its spans cut and shifted to match.
TrackedText tracked_substr(const TrackedText& text, size_t begin, size_t end);

}  // namespace keel::jinja
