// LengthBuckets: the classes of the decode-length predictor — generated-token counts in
// [0, max_tokens] cut into buckets of `width` tokens: bucket b holds [b·width, (b+1)·width), the
// last bucket also holds everything up to and including max_tokens (a generation stopped by the
// cap). A bucket stands for its midpoint when a number of tokens is wanted.
//
// Invariants (validate()): 1 ≤ width ≤ max_tokens ≤ kMaxTokens, so 1 ≤ num_buckets() ≤ kMaxTokens.
// Thread safety: plain data.
#pragma once

#include <cstdint>

#include "core/status.h"

namespace keel::predictor {

struct LengthBuckets {
  static constexpr int32_t kMaxTokens = 1 << 16;

  int32_t width = 16;        // tokens per bucket (--bucket-width; DeepServe's paper uses 128)
  int32_t max_tokens = 256;  // the generation cap the labels were made with

  [[nodiscard]] Status validate() const;

  // ceil(max_tokens / width).
  [[nodiscard]] int32_t num_buckets() const { return (max_tokens + width - 1) / width; }
  // The bucket of a generation of `tokens` tokens; negative counts go to bucket 0, counts past
  // the cap to the last bucket.
  [[nodiscard]] int32_t bucket_of(int32_t tokens) const;
  // First token count of `bucket` and one past its last (max_tokens + 1 for the last bucket).
  [[nodiscard]] int32_t lower(int32_t bucket) const { return bucket * width; }
  [[nodiscard]] int32_t upper(int32_t bucket) const;
  // The count a bucket predicts: the middle of [lower, min(upper, max_tokens)], rounded down.
  [[nodiscard]] int32_t midpoint(int32_t bucket) const;

  friend bool operator==(const LengthBuckets&, const LengthBuckets&) = default;
};

}  // namespace keel::predictor
