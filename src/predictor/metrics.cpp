// length_metrics (see metrics.h).
#include "predictor/metrics.h"

#include <algorithm>
#include <cstdlib>

#include "core/check.h"

namespace keel::predictor {

LengthMetrics length_metrics(const LengthBuckets& buckets,
                             const std::vector<int32_t>& actual_tokens,
                             const std::vector<int32_t>& predicted_buckets,
                             int32_t majority_bucket) {
  KEEL_CHECK(actual_tokens.size() == predicted_buckets.size());
  const auto nb = static_cast<size_t>(buckets.num_buckets());
  LengthMetrics m;
  m.count = static_cast<int64_t>(actual_tokens.size());
  m.confusion.assign(nb, std::vector<int64_t>(nb, 0));
  for (size_t i = 0; i < actual_tokens.size(); ++i) {
    const int32_t actual = buckets.bucket_of(actual_tokens[i]);
    const int32_t pred = predicted_buckets[i];
    KEEL_CHECK(pred >= 0 && static_cast<size_t>(pred) < nb);
    ++m.confusion[static_cast<size_t>(actual)][static_cast<size_t>(pred)];
    m.accuracy += pred == actual ? 1 : 0;
    m.baseline_accuracy += majority_bucket == actual ? 1 : 0;
    m.mae_tokens += std::abs(buckets.midpoint(pred) - actual_tokens[i]);
    m.baseline_mae_tokens += std::abs(buckets.midpoint(majority_bucket) - actual_tokens[i]);
  }
  if (m.count > 0) {
    const auto n = static_cast<double>(m.count);
    m.accuracy /= n;
    m.baseline_accuracy /= n;
    m.mae_tokens /= n;
    m.baseline_mae_tokens /= n;
  }
  return m;
}

int32_t majority_bucket(const LengthBuckets& buckets, const std::vector<int32_t>& tokens) {
  std::vector<int64_t> counts(static_cast<size_t>(buckets.num_buckets()), 0);
  for (int32_t t : tokens) ++counts[static_cast<size_t>(buckets.bucket_of(t))];
  return static_cast<int32_t>(std::max_element(counts.begin(), counts.end()) - counts.begin());
}

}  // namespace keel::predictor
