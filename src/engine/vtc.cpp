// The VTC step functions (see vtc.h).
#include "engine/vtc.h"

#include <algorithm>
#include <limits>

namespace keel::engine {

double vtc_counter(const VtcCounters& c, std::string_view tenant) {
  const auto it = c.counter.find(tenant);
  return it == c.counter.end() ? 0.0 : it->second;
}

namespace {

double& counter_of(VtcCounters* c, std::string_view tenant) {
  auto it = c->counter.find(tenant);
  if (it == c->counter.end()) it = c->counter.emplace(std::string(tenant), 0.0).first;
  return it->second;
}

}  // namespace

void vtc_arrive(VtcCounters* c, std::string_view tenant,
                std::span<const std::string_view> backlogged) {
  double floor = std::numeric_limits<double>::infinity();
  for (std::string_view other : backlogged) {
    if (other != tenant) floor = std::min(floor, vtc_counter(*c, other));
  }
  if (floor == std::numeric_limits<double>::infinity()) {  // nobody else waits
    if (!c->any_drained) {
      counter_of(c, tenant);
      return;
    }
    floor = vtc_counter(*c, c->last_drained);
  }
  double& mine = counter_of(c, tenant);
  mine = std::max(mine, floor);
}

void vtc_drained(VtcCounters* c, std::string_view tenant) {
  c->last_drained = std::string(tenant);
  c->any_drained = true;
}

std::optional<size_t> vtc_pick(const VtcCounters& c, std::span<const std::string_view> queue) {
  std::optional<size_t> best;
  double best_counter = 0.0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const double v = vtc_counter(c, queue[i]);
    if (!best || v < best_counter) {
      best = i;
      best_counter = v;
    }
  }
  return best;
}

void vtc_charge(VtcCounters* c, std::string_view tenant, double weight, int64_t input_tokens,
                int64_t output_tokens) {
  const double w = weight > 0 ? weight : 1.0;
  counter_of(c, tenant) += (kVtcInputWeight * static_cast<double>(input_tokens) +
                            kVtcOutputWeight * static_cast<double>(output_tokens)) /
                           w;
}

}  // namespace keel::engine
