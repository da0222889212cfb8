// LengthBuckets (see buckets.h).
#include "predictor/buckets.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/result.h"

namespace keel::predictor {

Status LengthBuckets::validate() const {
  if (width < 1)
    return Status::invalid_argument("bucket width must be ≥ 1, got " + std::to_string(width));
  if (max_tokens < width || max_tokens > kMaxTokens) {
    return Status::invalid_argument("max tokens must be in [bucket width " + std::to_string(width) +
                                    ", " + std::to_string(kMaxTokens) + "], got " +
                                    std::to_string(max_tokens));
  }
  return Status();
}

int32_t LengthBuckets::bucket_of(int32_t tokens) const {
  return std::clamp(tokens / width, 0, num_buckets() - 1);
}

int32_t LengthBuckets::upper(int32_t bucket) const {
  KEEL_CHECK(bucket >= 0 && bucket < num_buckets());
  return bucket + 1 == num_buckets() ? max_tokens + 1 : (bucket + 1) * width;
}

int32_t LengthBuckets::midpoint(int32_t bucket) const {
  const int32_t hi = std::min(upper(bucket) - 1, max_tokens);
  return (lower(bucket) + hi) / 2;
}

}  // namespace keel::predictor
