// SLO counts from histogram snapshots (see slo_count.h).
#include "cluster/policy/slo_count.h"

#include <cstddef>

namespace keel::cluster::autoscale {
namespace {

// Observations at or below the largest bound <= objective_s.
uint64_t within(const engine::HistogramSnapshot& h, double objective_s) {
  uint64_t n = 0;
  for (size_t i = 0; i < h.bounds.size() && i < h.cumulative.size(); ++i) {
    if (h.bounds[i] > objective_s) break;
    n = h.cumulative[i];
  }
  return n;
}

}  // namespace

SloCount count_within(const engine::HistogramSnapshot& before,
                      const engine::HistogramSnapshot& after, double objective_s) {
  const bool comparable = before.bounds == after.bounds && before.count <= after.count &&
                          within(before, objective_s) <= within(after, objective_s);
  const uint64_t met0 = comparable ? within(before, objective_s) : 0;
  const uint64_t total0 = comparable ? before.count : 0;
  SloCount c;
  c.total = static_cast<int64_t>(after.count - total0);
  c.met = static_cast<int64_t>(within(after, objective_s) - met0);
  return c;
}

}  // namespace keel::cluster::autoscale
