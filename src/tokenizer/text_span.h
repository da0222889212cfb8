// The tokenizer's names for plain spans: the byte ranges of a prompt that came from untrusted
// input (message contents), which Tokenizer::encode(TrackedText) tokenizes as text, never as
// control tokens. The types and their helpers are the Jinja engine's (jinja/text_span.h: the
// render is where spans are made); the tokenizer and its callers name them here because encode()
// is where they are consumed.
//
// Thread safety: plain values and pure functions.
#pragma once

#include "jinja/text_span.h"

namespace keel::tokenizer {

using jinja::TextSpan;
using jinja::TextSpans;
using jinja::TrackedText;

using jinja::append_span;
using jinja::append_spans;
using jinja::overlaps;
using jinja::tracked_substr;

}  // namespace keel::tokenizer
