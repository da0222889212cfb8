// choose_evictions (see eviction.h).
#include "store/eviction.h"

#include <algorithm>
#include <numeric>

namespace keel::store {

std::optional<std::vector<size_t>> choose_evictions(const std::vector<EntryUse>& entries,
                                                    uint64_t budget_bytes, uint64_t incoming) {
  std::vector<size_t> out;
  if (budget_bytes == 0) return out;
  if (incoming > budget_bytes) return std::nullopt;
  uint64_t used = 0;
  for (const EntryUse& e : entries) used += e.bytes;
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return entries[a].last_use_ns < entries[b].last_use_ns;
  });
  for (size_t idx : order) {
    if (used + incoming <= budget_bytes) break;
    if (entries[idx].pinned) continue;
    used -= entries[idx].bytes;
    out.push_back(idx);
  }
  if (used + incoming > budget_bytes) return std::nullopt;
  return out;
}

}  // namespace keel::store
