// The fleet for people and for Prometheus: GET /v1/cluster/status's JSON document (every TE's
// role, health, load, KV use and prefix-cache hit rate; the job counters and the router's
// decisions per branch over all JEs, and each JE's own, up or down) and the gateway's extra
// /metrics lines (keel:cluster_*).
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "cluster/protocol/messages.h"

namespace keel::cluster {

[[nodiscard]] Json fleet_status_json(const FleetStatus& status);
[[nodiscard]] std::string fleet_metrics_text(const FleetStatus& status, std::string_view model);

}  // namespace keel::cluster
