// The health side of `keel cluster up`: composes a TeReplacer over the TEs the command
// started (their names, commands and roles), the gateway's fleet client (the fleet as a JE sees
// it) and, when there is one, the warm pool (ClusterScaler); and a JeReplacer over the
// JEs it started. Also what the gateway's /health says
// of a fleet (server::FleetHealth): its TEs of the model that are healthy or busy, and whether
// requests are held while there are none.
//
// Thread safety: start_replacer() on the supervisor's thread; fleet_health() from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "cluster/gateway/fleet_client.h"
#include "control/repair/je_replacer.h"
#include "control/repair/te_replacer.h"
#include "control/scaleout/cluster_scaler.h"
#include "core/result.h"
#include "proc/process_supervisor.h"
#include "server/server_context.h"

namespace keel::control {

// What the replacers share: how long a replacement's start may take, where their events go, what
// runs keel for a cold-started replacement (cluster/protocol/executor_launch.h), and whether a TE
// may be replaced from the warm pool.
struct RepairConfig {
  std::chrono::milliseconds start_timeout{120000};
  std::string event_log;                  // JSON lines, appended; "" = none
  std::vector<std::string> keel_command;  // a replacement TE's
  bool warm_pool = false;                 // bind a warm TE before cold-starting one
};

struct StartedTes {
  std::vector<std::string> names;      // supervisor child names (= their spec's id)
  std::vector<cluster::TeSpec> specs;  // how each was started (keel te --spec -)
  std::vector<std::string> roles;      // "colocated", "prefill", "decode"
  std::vector<std::string> addresses;  // control addresses
};

// The JE supervisor over the JEs the command started (control/repair/je_replacer.h), reading the
// fleet through the gateway's fleet client and, when there is one, the TE replacer's own TEs.
[[nodiscard]] Result<std::unique_ptr<JeReplacer>> start_je_replacer(
    proc::ProcessSupervisor& sup, const RepairConfig& o, const std::vector<cluster::ManagedJe>& jes,
    cluster::FleetClient* fleet, const TeReplacer* tes);

[[nodiscard]] Result<std::unique_ptr<TeReplacer>> start_replacer(
    proc::ProcessSupervisor& sup, const RepairConfig& o, const StartedTes& tes,
    const std::vector<std::string>& je_addresses, cluster::FleetClient* fleet,
    ClusterScaler* scaler);

// The fleet as one JE sees it: its healthy or busy TEs serving `model`; the gateway's activator
// (timeout and held requests) from `fleet` itself.
[[nodiscard]] server::FleetHealth fleet_health(const cluster::FleetClient& fleet,
                                               const std::string& model);

}  // namespace keel::control
