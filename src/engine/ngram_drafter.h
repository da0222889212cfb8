// The n-gram (prompt-lookup) drafter: for n from ngram_max down to ngram_min, find the most
// recent earlier occurrence of the sequence's last n tokens in the sequence itself (prompt and
// output) and propose the tokens that followed it. No model: it wins on text that repeats its
// context (code edits, summaries quoting the source, repetitive stories) and proposes nothing
// elsewhere, which costs nothing.
// Cost: O(len · n) per call, scanning backwards; the scan stops at the first (most recent) match.
// Thread safety: a pure function.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace keel::engine {

// Appends to *out (cleared first) up to `max_drafts` tokens that followed the most recent earlier
// occurrence of tokens' last n tokens, for the largest n in [ngram_min, ngram_max] that has one
// (an occurrence must be followed by at least one token). Empty when none matches.
void ngram_draft(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max,
                 int32_t max_drafts, std::vector<int32_t>* out);

}  // namespace keel::engine
