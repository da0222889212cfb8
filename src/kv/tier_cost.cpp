// Fetch-vs-recompute cut: see tier_cost.h.
#include "kv/tier_cost.h"

namespace keel::kv {

int32_t blocks_to_fetch(std::span<const TierKind> where, const TierCost& host, const TierCost& disk,
                        size_t block_bytes, int32_t block_tokens,
                        double prefill_seconds_per_token) {
  const auto n = static_cast<int32_t>(where.size());
  if (prefill_seconds_per_token <= 0.0) return n;
  const double recompute = static_cast<double>(block_tokens) * prefill_seconds_per_token;
  // cost(cut) = fetch[0, cut) + (n − cut) · recompute; scan cuts upwards, keep the cheapest
  // (the later cut on ties).
  double fetched = 0.0;
  double best = static_cast<double>(n) * recompute;
  int32_t best_cut = 0;
  for (int32_t cut = 1; cut <= n; ++cut) {
    const TierKind k = where[static_cast<size_t>(cut - 1)];
    fetched += (k == TierKind::kHost ? host : disk).read_seconds(block_bytes);
    const double cost = fetched + static_cast<double>(n - cut) * recompute;
    if (cost <= best) {
      best = cost;
      best_cut = cut;
    }
  }
  return best_cut;
}

int32_t peer_blocks_to_fetch(int32_t num_blocks, const TierCost& link, size_t block_bytes,
                             int32_t block_tokens, double prefill_seconds_per_token) {
  if (num_blocks <= 0) return 0;
  if (prefill_seconds_per_token <= 0.0) return num_blocks;
  const double recompute = static_cast<double>(block_tokens) * prefill_seconds_per_token;
  const double per_block = static_cast<double>(block_bytes) * link.seconds_per_byte;
  double best = static_cast<double>(num_blocks) * recompute;  // cut 0: no request at all
  int32_t best_cut = 0;
  for (int32_t cut = 1; cut <= num_blocks; ++cut) {
    const double cost = link.latency_seconds + static_cast<double>(cut) * per_block +
                        static_cast<double>(num_blocks - cut) * recompute;
    if (cost <= best) {
      best = cost;
      best_cut = cut;
    }
  }
  return best_cut;
}

}  // namespace keel::kv
