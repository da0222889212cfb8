// The cluster gateway's server (see gateway_server.h).
#include "control/up/gateway_server.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "cluster/gateway/fleet_report.h"
#include "control/repair/cluster_health.h"
#include "core/log.h"
#include "proc/ready_line.h"
#include "proc/stop_signals.h"
#include "server/chat_formatter.h"

namespace keel::control {

Result<server::ServerDeps> gateway_deps(cluster::FleetClient* fleet, const host::EngineHost& meta,
                                        const std::string& reasoning_parser,
                                        const std::string& name) {
  server::ServerDeps deps{fleet, &meta.tokenizer(),
                          server::template_chat_formatter(meta.chat_template(), &meta.tokenizer()),
                          nullptr};
  deps.tool_format = server::detect_tool_format(meta.chat_template()->source());
  KEEL_ASSIGN_OR_RETURN(deps.reasoning_parser, server::parse_reasoning_parser(reasoning_parser));
  deps.fleet_health = [fleet, name] { return fleet_health(*fleet, name); };
  deps.cluster_status = [fleet]() -> Result<std::string> {
    KEEL_ASSIGN_OR_RETURN(cluster::FleetStatus s, fleet->fleet_status());
    return cluster::fleet_status_json(s).dump();
  };
  return deps;
}

Status run_gateway(const GatewayOptions& o, const UpHooks& hooks, const sigset_t& stop_signals) {
  if (o.je_addresses.empty()) {
    return Status::invalid_argument(
        "cluster gateway: --je HOST:PORT is required (a JE of the "
        "running cluster: `keel cluster status --json` lists them)");
  }
  std::string path = o.serve.model_path;
  if (hooks.resolve_model) {
    ThreadPool pool(1);
    KEEL_ASSIGN_OR_RETURN(path, hooks.resolve_model(o.serve.model_path, pool));
  }
  const std::string name =
      hooks.model_name ? hooks.model_name(o.serve.served_model_name, o.serve.model_path, path)
      : !o.serve.served_model_name.empty() ? o.serve.served_model_name
                                           : std::filesystem::path(path).stem().string();
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<host::EngineHost> meta,
      host::EngineHost::open(path, {o.serve.chat_template, o.serve.chat_template_file}));
  cluster::FleetClientConfig fc;
  fc.je_addresses = o.je_addresses;
  fc.event_host = o.serve.host;  // the TEs stream tokens here
  fc.connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<cluster::FleetClient> fleet,
                        cluster::FleetClient::start(fc));
  cluster::FleetClient* f = fleet.get();
  KEEL_ASSIGN_OR_RETURN(server::ServerDeps deps,
                        gateway_deps(f, *meta, o.serve.reasoning_parser, name));
  deps.extra_metrics = [f, name]() -> std::string {
    Result<cluster::FleetStatus> s = f->fleet_status();
    std::string text = s.ok() ? cluster::fleet_metrics_text(*s, name) : std::string();
    return text + f->hop_metrics_text();
  };
  server::ServerConfig c = hooks.gateway;
  c.served_model_name = name;
  c.allow_runtime_lora = true;  // the FleetClient refuses run-time loads (400)
  KEEL_ASSIGN_OR_RETURN(std::unique_ptr<server::Server> server,
                        server::Server::start(c, std::move(deps)));
  KEEL_LOG_INFO("ready: gateway on http://{}:{} (model '{}') over {} JE(s)", c.host, server->port(),
                name, o.je_addresses.size());
  KEEL_TRY(proc::print_ready_line(
      nlohmann::json{{"role", "gateway"}, {"port", server->port()}, {"pid", getpid()}}));
  int sig = 0;
  sigwait(&stop_signals, &sig);
  const auto drain =
      std::chrono::milliseconds(static_cast<int64_t>(o.serve.drain_timeout_s * 1000));
  KEEL_LOG_INFO("gateway: {}: draining (up to {:.1f} s)", proc::signal_name(sig),
                o.serve.drain_timeout_s);
  server->stop_accepting();
  fleet->drain(drain);
  server->shutdown();
  fleet->stop();
  KEEL_LOG_INFO("gateway: stopped");
  return {};
}

}  // namespace keel::control
