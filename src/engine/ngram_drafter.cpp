// The n-gram (prompt-lookup) drafter (see ngram_drafter.h) and the drafter dispatch (drafter.h).
#include "engine/ngram_drafter.h"

#include <algorithm>

#include "engine/drafter.h"

namespace keel::engine {

void ngram_draft(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max,
                 int32_t max_drafts, std::vector<int32_t>* out) {
  out->clear();
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_drafts <= 0 || ngram_min < 1) return;
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(len - n));
    // Candidate starts i < len - n, most recent first; the match [i, i + n) must be followed by
    // a token, i.e. i + n < len, which holds for every i < len - n.
    for (int64_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t from = i + n;
      const int64_t to = std::min<int64_t>(len, from + max_drafts);
      out->assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

void draft_tokens(const SpeculativeParams& params, std::span<const int32_t> tokens,
                  std::span<const int32_t> proposed, int32_t max_drafts,
                  std::vector<int32_t>* out) {
  out->clear();
  const int32_t limit = std::min(params.k, max_drafts);
  switch (params.method) {
    case SpecMethod::kNone:
      return;
    case SpecMethod::kNgram:
      ngram_draft(tokens, params.ngram_min, params.ngram_max, limit, out);
      return;
    case SpecMethod::kDraftHead:
    case SpecMethod::kDraftModel:
      if (limit <= 0) return;
      out->assign(proposed.begin(),
                  proposed.begin() + std::min<ptrdiff_t>(limit, std::ssize(proposed)));
      return;
  }
}

}  // namespace keel::engine
