// cluster up's scale-out side (cluster_up.h): the scaler — the model store's preload, the warm
// pool and the control port `keel cluster scale` reaches (scaleout/cluster_scaler.h) — and the
// autoscaler loop (autoscale/cluster_autoscaler.h) with its groups from the flags, carried out by
// the warm pool, Kubernetes (--scaler k8s) or, with --nodes auto, the node agents.
//
// Thread safety: call from cluster up's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/gateway/fleet_client.h"
#include "control/autoscale/cluster_autoscaler.h"
#include "control/manager/cluster_membership.h"
#include "control/placement/cluster_nodes.h"
#include "control/scaleout/cluster_scaler.h"
#include "control/up/up_options.h"
#include "core/result.h"
#include "proc/process_supervisor.h"

namespace keel::control {

// The scaler of `o` under `sup`: its warm TEs run `keel`, bind `path` and serve it as `name`.
Result<std::unique_ptr<ClusterScaler>> start_scaler(proc::ProcessSupervisor& sup,
                                                    const ClusterUpOptions& o,
                                                    const std::vector<std::string>& keel,
                                                    const std::string& path,
                                                    const std::string& name);

// The autoscaler's groups: colocated (--max), prefill (--max-prefill: the TTFT objective its
// signal) and decode (--max-decode: the TPOT one), each whose max is > 0; the panic window 10 %
// of the stable one unless given.
[[nodiscard]] std::vector<AutoscaleGroupConfig> autoscale_groups(const AutoscaleOptions& a);

// The autoscaler of `o` over the fleet behind `je_addresses`; its scale-outs through `scaler`
// (null: cold starts), Kubernetes, or the agents of `nodes` under --nodes auto.
Result<std::unique_ptr<ClusterAutoscaler>> start_autoscaler(
    const ClusterUpOptions& o, const std::vector<std::string>& je_addresses,
    const std::string& path, const std::string& name, proc::ProcessSupervisor& sup,
    ClusterScaler* scaler, cluster::FleetClient* fleet, ClusterNodes& nodes,
    ClusterMembership* members);

}  // namespace keel::control
