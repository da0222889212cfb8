// PageSummary::add_key and quest_upper_bound (see page_summary.h).
#include "sparse/page_summary.h"

#include <algorithm>
#include <limits>

namespace keel::sparse {

void PageSummary::add_key(std::span<const float> k) {
  if (num_tokens == 0) {
    k_min.assign(k.begin(), k.end());
    k_max.assign(k.begin(), k.end());
  } else {
    for (size_t c = 0; c < k.size(); ++c) {
      k_min[c] = std::min(k_min[c], k[c]);
      k_max[c] = std::max(k_max[c], k[c]);
    }
  }
  ++num_tokens;
}

float quest_upper_bound(const PageSummary& page, std::span<const float> q,
                        const QueryShape& shape) {
  if (page.num_tokens == 0) return -std::numeric_limits<float>::infinity();
  const int32_t group = shape.n_heads / shape.n_kv_heads;
  float best = -std::numeric_limits<float>::infinity();
  for (int32_t h = 0; h < shape.n_heads; ++h) {
    const size_t qo = static_cast<size_t>(h) * static_cast<size_t>(shape.head_dim);
    const size_t ko = static_cast<size_t>(h / group) * static_cast<size_t>(shape.head_dim);
    float bound = 0.0f;
    for (int32_t c = 0; c < shape.head_dim; ++c) {
      const float qc = q[qo + static_cast<size_t>(c)];
      bound += std::max(qc * page.k_min[ko + static_cast<size_t>(c)],
                        qc * page.k_max[ko + static_cast<size_t>(c)]);
    }
    best = std::max(best, bound);
  }
  return best;
}

}  // namespace keel::sparse
