// group_signals (see autoscale_signals.h).
#include "cluster/policy/autoscale_signals.h"

#include <algorithm>

#include "cluster/policy/slo_count.h"

namespace keel::cluster::autoscale {

namespace {

int64_t queued_or_running(const TeInfo& te) {
  return int64_t{te.load.num_waiting} + te.load.num_running;
}

bool in(const std::set<std::string>* set, const std::string& address) {
  return set != nullptr && set->count(address) != 0;
}

void add(SloCount* to, SloCount c) {
  to->met += c.met;
  to->total += c.total;
}

}  // namespace

GroupSignals group_signals(const FleetStatus& status, const GroupKey& group,
                           const AutoscalerConfig& policy, DrainSets drains, GatewayCounts gateway,
                           double now_s,
                           std::map<std::string, engine::MetricsSnapshot>* last_metrics) {
  GroupSignals s;
  s.now_s = now_s;
  int64_t at_group = 0;  // requests at the group's TEs (draining ones included)
  int64_t at_model = 0;  // requests at the model's TEs of every role
  std::map<std::string, engine::MetricsSnapshot> seen;
  for (size_t i = 0; i < status.fleet.tes.size(); ++i) {
    const TeInfo& te = status.fleet.tes[i];
    if (!te.healthy || te.model != group.model || in(drains.stopped, te.address)) continue;
    at_model += queued_or_running(te);
    if (te.role != group.role) continue;
    at_group += queued_or_running(te);
    if (in(drains.draining, te.address)) continue;
    s.tes.push_back(te);
    if (i >= status.metrics.size()) continue;
    const engine::MetricsSnapshot& m = status.metrics[i];
    const engine::MetricsSnapshot& before = (*last_metrics)[te.id];
    if (policy.ttft_slo_s > 0) {
      add(&s.ttft, count_within(before.time_to_first_token_seconds, m.time_to_first_token_seconds,
                                policy.ttft_slo_s));
    }
    if (policy.tpot_slo_s > 0) {
      add(&s.tpot, count_within(before.inter_token_latency_seconds, m.inter_token_latency_seconds,
                                policy.tpot_slo_s));
    }
    seen[te.id] = m;
  }
  *last_metrics = std::move(seen);
  const bool colocated = group.role == TeRole::kColocated;
  s.held = gateway.held;
  if (s.tes.empty()) {
    // No ready TE: every request the gateway has not placed waits for one, including one whose
    // first try has not yet come back Unavailable (the gateway counts it held only after that).
    s.held = std::max(s.held, gateway.jobs - (colocated ? at_group : at_model));
  }
  // A colocated group's requests are the gateway's too, including those between the JE and a
  // TE's first report; a role's are only those at its TEs.
  s.in_flight = colocated ? std::max(at_group, gateway.jobs - s.held) : at_group;
  return s;
}

}  // namespace keel::cluster::autoscale
