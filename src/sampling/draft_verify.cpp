// Draft verification (see draft_verify.h): sample each row in turn, stop at the first mismatch.
#include "sampling/draft_verify.h"

#include "core/check.h"

namespace keel::sampling {

int32_t verify_drafts(Sampler& sampler, std::span<float> rows, std::span<const int32_t> drafts,
                      std::vector<SampleOutput>* out) {
  const auto vocab = static_cast<size_t>(sampler.vocab_size());
  KEEL_CHECK(rows.size() == (drafts.size() + 1) * vocab);
  for (size_t i = 0; i <= drafts.size(); ++i) {
    SampleOutput s = sampler.sample_with_logprobs(rows.subspan(i * vocab, vocab));
    sampler.accept(s.token);
    const bool accepted = i < drafts.size() && s.token == drafts[i];
    out->push_back(std::move(s));
    if (!accepted) return static_cast<int32_t>(i);
  }
  KEEL_CHECK_MSG(false, "verify_drafts: the last row always ends verification");
  return 0;
}

}  // namespace keel::sampling
