// The cluster manager's restart rule for its job executors (JEs): a JE it started, and what a
// restart gets — the JE's own spec listening at the same port, routing to the TEs serving now
// (as the last fleet snapshot lists them, then those the manager started since) with a short TE
// connect timeout. The loop that applies it is control/repair/je_replacer.h.
//
// Thread safety: pure functions over plain values.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cluster/protocol/fleet.h"
#include "cluster/protocol/je_spec.h"

namespace keel::cluster {

// A JE the manager started (and restarts).
struct ManagedJe {
  std::string name;     // its supervisor child name (its spec's id)
  std::string address;  // "127.0.0.1:port": a replacement listens there too
  pid_t pid = 0;        // its process (0 while down)
  // How it was started (executor_launch.h): a restart reuses both (je_replacement_spec).
  std::vector<std::string> keel_command;
  JeSpec spec;
};

// A restart's spec: `spec` listening on `port`, routing to `te_addresses` (none: the TEs are
// added later) with `connect_timeout` per TE. Pure.
[[nodiscard]] JeSpec je_replacement_spec(JeSpec spec, uint16_t port,
                                         const std::vector<std::string>& te_addresses,
                                         std::chrono::milliseconds connect_timeout);

// The TEs a replacement JE should route to, by control address: those `fleet` lists as serving
// (healthy or busy), then those in `known` it does not list at all (started since). Pure.
[[nodiscard]] std::vector<std::string> replacement_te_addresses(
    const FleetSnapshot& fleet, const std::vector<std::string>& known);

}  // namespace keel::cluster
