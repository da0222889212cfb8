// How plain spans (text_span.h: bytes that came from untrusted input, i.e. message contents)
// travel through a render, so that the rendered prompt knows which of its bytes a user wrote:
//   - exact: output of a string, concatenation (`~`, `+` of strings), indexing, slicing and
//     iterating a string, set-blocks and macro output keep every byte's origin;
//   - conservative: any other built-in (filters, methods, `%`, `*`) that makes a new string
//     while one of its inputs holds plain text returns that string wholly plain (`content | trim`,
//     `content.split(...)`, `messages | tojson`); a value it passes through unchanged keeps its
//     own spans, and results without plain inputs stay markup.
// Plain text is never lost; markup is marked plain only when a built-in mixes it with user text
// (then it tokenizes as text). Dict keys carry no spans: templates never print user text as keys.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "jinja/value.h"

namespace keel::jinja {

// True when `v` is, or holds (in lists, dict values, namespace attributes), a string with plain
// spans.
[[nodiscard]] bool holds_plain(const Value& v);

// `v` with every string inside (lists, dict values) wholly plain — how request JSON (message
// fields, tools, documents) enters a render.
[[nodiscard]] Value mark_plain(const Value& v);

// The concatenation of `parts` as `~` does (non-strings through str(), wholly plain when they
// hold plain text), spans kept.
[[nodiscard]] Value concat_tracked(const std::vector<Value>& parts);

// Bytes [begin, end) of string `s`, spans kept.
[[nodiscard]] Value substr_tracked(const Value& s, size_t begin, size_t end);

// The characters of string `s` given by their byte offsets (`offsets[i]..offsets[i+1]` is
// character i) at the indices `picked`, concatenated; a character is plain when any of its
// bytes is.
[[nodiscard]] Value pick_chars_tracked(const Value& s, const std::vector<size_t>& offsets,
                                       const std::vector<size_t>& picked);

// The conservative rule after a built-in ran: when any of `inputs` (and `args`, if given) holds
// plain text, every string in `result` (itself, or inside lists) that is neither one of the
// inputs' own strings nor already spanned becomes wholly plain.
[[nodiscard]] Value taint_new_strings(Value result, const std::vector<const Value*>& inputs,
                                      const CallArgs* args = nullptr);

}  // namespace keel::jinja
