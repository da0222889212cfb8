// `keel cluster up`'s replacer and fleet readiness (see cluster_health.h).
#include "control/repair/cluster_health.h"

#include <chrono>

#include "cluster/gateway/fleet_merge.h"

namespace keel::control {

Result<std::unique_ptr<JeReplacer>> start_je_replacer(proc::ProcessSupervisor& sup,
                                                      const RepairConfig& o,
                                                      const std::vector<cluster::ManagedJe>& jes,
                                                      cluster::FleetClient* fleet,
                                                      const TeReplacer* tes) {
  JeReplacerConfig c;
  c.start_timeout = o.start_timeout;
  c.event_log = o.event_log;
  c.fleet = [fleet]() -> Result<cluster::FleetSnapshot> {
    KEEL_ASSIGN_OR_RETURN(cluster::FleetStatus s, fleet->fleet_status());
    return s.fleet;
  };
  if (tes != nullptr) c.known_tes = [tes] { return tes->live_addresses(); };
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<JeReplacer> r,
      JeReplacer::create(std::make_shared<SupervisedProcesses>(&sup), std::move(c)));
  for (const cluster::ManagedJe& je : jes) r->manage(je);
  return r;
}

Result<std::unique_ptr<TeReplacer>> start_replacer(proc::ProcessSupervisor& sup,
                                                   const RepairConfig& o, const StartedTes& tes,
                                                   const std::vector<std::string>& je_addresses,
                                                   cluster::FleetClient* fleet,
                                                   ClusterScaler* scaler) {
  TeReplacerConfig c;
  c.je_addresses = je_addresses;
  c.start_timeout = o.start_timeout;
  c.event_log = o.event_log;
  c.fleet = [fleet]() -> Result<cluster::FleetSnapshot> {
    KEEL_ASSIGN_OR_RETURN(cluster::FleetStatus s, fleet->fleet_status());
    return s.fleet;
  };
  if (scaler != nullptr && o.warm_pool) {
    c.warm_idle = [scaler] { return scaler->idle_warm(); };
    c.warm_bind = [scaler](cluster::TeRole role) -> Result<cluster::ManagedTe> {
      const cluster::Json out = scaler->scale_out(1, role);
      const cluster::Json tes = out.value("tes", cluster::Json::array());
      if (!out.value("ok", false) || tes.empty()) {
        return Status::unavailable("warm pool bind failed: " +
                                   out.value("errors", cluster::Json::array()).dump());
      }
      cluster::ManagedTe te;
      te.name = tes[0].value("te", "");
      te.pid = static_cast<pid_t>(tes[0].value("pid", int64_t{0}));
      te.address = tes[0].value("address", "");
      return te;  // its spec: the replaced TE's (the replacer fills it in)
    };
  }
  KEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<TeReplacer> r,
      TeReplacer::create(std::make_shared<SupervisedProcesses>(&sup), std::move(c)));
  for (size_t i = 0; i < tes.names.size(); ++i) {
    cluster::ManagedTe te;
    te.name = tes.names[i];
    te.keel_command = o.keel_command;
    te.spec = tes.specs[i];
    te.role = cluster::parse_te_role(tes.roles[i]).value_or(cluster::TeRole::kColocated);
    te.address = tes.addresses[i];
    const std::optional<proc::Child> child = sup.find(te.name);
    te.pid = child ? child->pid : 0;
    r->manage(std::move(te));
  }
  r->set_next_id(static_cast<int>(tes.names.size()));
  return r;
}

server::FleetHealth fleet_health(const cluster::FleetClient& fleet, const std::string& model) {
  server::FleetHealth h;
  h.activation_timeout_s = std::chrono::duration<double>(fleet.activation_timeout()).count();
  h.held_requests = fleet.num_held();
  Result<cluster::FleetStatus> s = fleet.fleet_status_snapshot();  // an io thread: never waits
  h.reachable = s.ok();
  if (!s.ok()) {
    h.job_executors_down = s.status().message();  // names each JE and why (fleet_merge.h)
    return h;
  }
  h.job_executors_down = cluster::describe_down_jes(s->job_executors);
  for (const cluster::TeInfo& te : s->fleet.tes) {
    if (te.model == model && te.healthy && cluster::health::serving(te.state)) ++h.serving_tes;
  }
  return h;
}

}  // namespace keel::control
