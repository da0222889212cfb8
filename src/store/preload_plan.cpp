// ewma_rate / plan_preloads (see preload_plan.h).
#include "store/preload_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace keel::store {

double ewma_rate(double previous, double observed, double dt_s, double half_life_s) {
  if (dt_s <= 0.0) return previous;
  if (half_life_s <= 0.0) return observed;
  const double alpha = 1.0 - std::exp2(-dt_s / half_life_s);
  return previous + alpha * (observed - previous);
}

std::vector<PreloadAction> plan_preloads(const PreloadSnapshot& snapshot) {
  if (snapshot.budget_bytes == 0) return {};
  const std::vector<ModelDemand>& m = snapshot.models;
  std::vector<size_t> order(m.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (m[a].rate != m[b].rate) return m[a].rate > m[b].rate;
    if (m[a].resident != m[b].resident) return m[a].resident;
    return m[a].model < m[b].model;
  });
  std::vector<bool> wanted(m.size(), false);
  uint64_t planned = 0;
  for (size_t idx : order) {
    if (m[idx].rate < snapshot.min_rate) break;
    if (planned + m[idx].bytes > snapshot.budget_bytes) continue;  // a smaller one may fit
    wanted[idx] = true;
    planned += m[idx].bytes;
  }
  uint64_t resident_bytes = 0;
  uint64_t incoming = 0;
  for (size_t i = 0; i < m.size(); ++i) {
    if (m[i].resident) resident_bytes += m[i].bytes;
    if (wanted[i] && !m[i].resident) incoming += m[i].bytes;
  }
  std::vector<PreloadAction> out;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {  // lowest rate first
    if (resident_bytes + incoming <= snapshot.budget_bytes) break;
    if (m[*it].resident && !wanted[*it]) {
      out.push_back({PreloadActionKind::kEvict, m[*it].model});
      resident_bytes -= m[*it].bytes;
    }
  }
  for (size_t idx : order) {
    if (wanted[idx] && !m[idx].resident) out.push_back({PreloadActionKind::kPreload, m[idx].model});
  }
  return out;
}

}  // namespace keel::store
