// The health side of `keel cluster up`: composes a cluster::TeReplacer over the TEs the command
// started (their names, commands and roles), the gateway's fleet client (the fleet as a JE sees
// it) and, when there is one, the warm pool (ClusterScaler). Also the gateway's /health rule for
// a fleet: ready only while some TE of the model is healthy or busy.
//
// Thread safety: start_replacer() on the supervisor's thread; fleet_serving() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cluster/fleet_client.h"
#include "cluster/process_supervisor.h"
#include "cluster/te_replacer.h"
#include "cluster_commands.h"
#include "cluster_scaler.h"
#include "core/result.h"

namespace keel::cli {

struct StartedTes {
  std::vector<std::string> names;               // supervisor child names (= their --id)
  std::vector<std::vector<std::string>> argvs;  // their commands
  std::vector<std::string> roles;               // "colocated", "prefill", "decode"
  std::vector<std::string> addresses;           // control addresses
};

[[nodiscard]] Result<std::unique_ptr<cluster::TeReplacer>> start_replacer(
    cluster::ProcessSupervisor& sup, const ClusterUpOptions& o, const StartedTes& tes,
    const std::vector<std::string>& je_addresses, cluster::FleetClient* fleet,
    ClusterScaler* scaler);

// True when the fleet (as one JE sees it) has a healthy or busy TE serving `model`.
[[nodiscard]] bool fleet_serving(const cluster::FleetClient& fleet, const std::string& model);

}  // namespace keel::cli
