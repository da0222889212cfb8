// Per-layer, per-expert routed-token counters; see expert_token_counts.h.
#include "model/expert_token_counts.h"

#include <algorithm>

#include "core/check.h"

namespace keel::model {

ExpertTokenCounts::ExpertTokenCounts(int64_t n_layer, int64_t n_expert)
    : n_layer_(n_layer),
      n_expert_(n_expert),
      counts_(std::make_unique<std::atomic<int64_t>[]>(static_cast<size_t>(n_layer * n_expert))) {
  KEEL_CHECK(n_layer >= 1 && n_expert >= 1);
}

void ExpertTokenCounts::add(int64_t layer, std::span<const int32_t> experts) {
  if (layer < 0 || layer >= n_layer_) return;
  std::atomic<int64_t>* row = counts_.get() + layer * n_expert_;
  for (const int32_t e : experts) {
    if (e >= 0 && e < n_expert_) row[e].fetch_add(1, std::memory_order_relaxed);
  }
}

std::vector<int64_t> ExpertTokenCounts::snapshot() const {
  std::vector<int64_t> out(static_cast<size_t>(n_layer_ * n_expert_));
  for (size_t i = 0; i < out.size(); ++i) out[i] = counts_[i].load(std::memory_order_relaxed);
  return out;
}

ExpertLoad summarize_expert_load(std::span<const int64_t> tokens, int64_t n_layer,
                                 int64_t n_expert) {
  ExpertLoad load;
  int64_t layers_with_tokens = 0;
  for (int64_t l = 0; l < n_layer && n_expert > 0; ++l) {
    if (static_cast<size_t>((l + 1) * n_expert) > tokens.size()) break;
    const std::span<const int64_t> row =
        tokens.subspan(static_cast<size_t>(l * n_expert), static_cast<size_t>(n_expert));
    int64_t total = 0, busiest = 0, idle = 0;
    for (const int64_t t : row) {
      total += t;
      busiest = std::max(busiest, t);
      idle += t == 0 ? 1 : 0;
    }
    if (total == 0) continue;
    load.routed += total;
    load.idle_experts += idle;
    const double ratio =
        static_cast<double>(busiest) * static_cast<double>(n_expert) / static_cast<double>(total);
    load.mean_max_over_mean += ratio;
    ++layers_with_tokens;
    if (ratio > load.worst_max_over_mean) {
      load.worst_max_over_mean = ratio;
      load.worst_layer = l;
    }
  }
  if (layers_with_tokens > 0) load.mean_max_over_mean /= static_cast<double>(layers_with_tokens);
  return load;
}

}  // namespace keel::model
