// The autoscaler's signals for one group (model, role), gathered from a snapshot of the fleet as
// a JE reports it and the gateway's request counts — a pure function, so what each role's
// autoscaler sees is tested without processes (the cluster manager's ClusterAutoscaler calls it
// once per group and tick).
//   - the group's TEs: healthy, of the model and role, not stopped by a drain; a draining TE's
//     requests still count as in flight but it is no replica (it cannot be drained again);
//   - colocated: in flight = the requests at the group's TEs, or the gateway's count when that is
//     higher (a request between the JE and a TE's first report); held = the gateway's held
//     requests, and with no ready TE every request not at a TE;
//   - prefill / decode: in flight = the requests at the role's TEs only (a decode TE's queue is
//     not the prefill side's); held as colocated, against the requests at TEs of every role —
//     the router needs a prefill and a decode TE, so a role with no ready TE holds them all;
//   - SLO counts from the TEs' histograms since the previous call (`last_metrics`, by TE id,
//     replaced with this call's): TTFT when the policy has a TTFT objective, inter-token gaps when
//     it has a TPOT one (the cluster manager gives prefill groups the first, decode the second).
// Thread safety: pure; `last_metrics` belongs to the caller.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cluster/policy/autoscaler.h"
#include "cluster/protocol/messages.h"

namespace keel::cluster::autoscale {

struct GroupKey {
  std::string model;
  TeRole role = TeRole::kColocated;
};

// The gateway's view: requests it has placed with a JE and not finished, and those it holds
// because no TE could take them.
struct GatewayCounts {
  int64_t jobs = 0;
  int64_t held = 0;
};

// TEs the cluster manager is draining or has stopped, by address.
struct DrainSets {
  const std::set<std::string>* draining = nullptr;
  const std::set<std::string>* stopped = nullptr;
};

// `pending` is left 0: TEs being bound are the caller's to count.
[[nodiscard]] GroupSignals group_signals(
    const FleetStatus& status, const GroupKey& group, const AutoscalerConfig& policy,
    DrainSets drains, GatewayCounts gateway, double now_s,
    std::map<std::string, engine::MetricsSnapshot>* last_metrics);

}  // namespace keel::cluster::autoscale
