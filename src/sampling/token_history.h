// TokenHistory: the tokens a request has seen, kept incrementally for the penalties — which
// distinct ids occur in the prompt, and how often each id occurs in the generated output.
//
// Storage is sparse (one entry per distinct id seen, plus a hash index), so its size follows the
// request's length, not the vocabulary's (a dense count array would cost 600 KB per request at a
// 152k vocabulary). Penalties iterate entries() in O(distinct ids).
// Invariant: every entry has in_prompt or output_count > 0, except entries left behind when
// set_prompt() replaces an earlier prompt (those are neutral: both false/0).
// Thread safety: a value type; one owner (the request's Sampler).
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace keel::sampling {

class TokenHistory {
 public:
  struct Entry {
    int32_t token_id = 0;
    int32_t output_count = 0;  // occurrences in the generated output
    bool in_prompt = false;    // occurs at least once in the prompt
  };

  // Marks the distinct ids of `tokens` as prompt tokens, replacing any earlier prompt; output
  // counts are kept. Ids must be >= 0 (the Sampler checks the upper bound).
  void set_prompt(std::span<const int32_t> tokens);
  // Records one generated token.
  void add_output(int32_t token_id);
  // Forgets everything.
  void clear();

  [[nodiscard]] int32_t output_count(int32_t token_id) const;
  [[nodiscard]] bool in_prompt(int32_t token_id) const;
  // Total generated tokens recorded.
  [[nodiscard]] int64_t num_output_tokens() const { return num_output_tokens_; }
  // One entry per distinct id seen, in first-seen order.
  [[nodiscard]] std::span<const Entry> entries() const { return entries_; }

 private:
  Entry& entry_for(int32_t token_id);
  [[nodiscard]] const Entry* find(int32_t token_id) const;

  std::vector<Entry> entries_;
  std::unordered_map<int32_t, uint32_t> index_;  // token id → position in entries_
  int64_t num_output_tokens_ = 0;
};

}  // namespace keel::sampling
