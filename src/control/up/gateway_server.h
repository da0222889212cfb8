// The cluster gateway: keel's OpenAI server with a FleetClient as its engine. gateway_deps()
// gives the server what a gateway has — the model's tokenizer and chat template (it renders and
// tokenizes before routing), the fleet's health and status — for `keel cluster up`'s own gateway
// and for run_gateway(): `keel cluster gateway`, one more gateway process in front of a running
// cluster's job executors (docs/cluster.md, "More gateways"). It starts no JE or TE and registers
// nothing: it connects to the JEs it is given, serves until a stop signal, then drains. Several
// gateways share stored responses through --responses-dir (docs/responses.md).
//
// Thread safety: run_gateway runs on the caller's thread until a stop signal (blocked by the
// caller).
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "cluster/gateway/fleet_client.h"
#include "control/up/cluster_up.h"
#include "core/result.h"
#include "host/engine_host.h"
#include "server/server.h"

namespace keel::control {

// The server's dependencies over `fleet` for model `name` (`meta`: its tokenizer and template);
// `reasoning_parser` is --reasoning-parser. extra_metrics is left to the caller.
Result<server::ServerDeps> gateway_deps(cluster::FleetClient* fleet, const host::EngineHost& meta,
                                        const std::string& reasoning_parser,
                                        const std::string& name);

struct GatewayOptions {
  host::ServeOptions serve;               // the model (-m), --served-model-name, HTTP flags
  std::vector<std::string> je_addresses;  // --je HOST:PORT (repeatable)
  double start_timeout_s = 60.0;          // waiting for a JE to report a serving TE
};

// `keel cluster gateway`: the model's tokenizer and template, a FleetClient over the JEs, the
// server (hooks.gateway: its HTTP front and state), a ready line {"role":"gateway","port","pid"};
// on a stop signal it drains (--drain-timeout) and returns.
Status run_gateway(const GatewayOptions& o, const UpHooks& hooks, const sigset_t& stop_signals);

}  // namespace keel::control
