// cluster up's scale-out side; see up_scaling.h.
#include "control/up/up_scaling.h"

#include <memory>

#include "control/up/up_plan.h"
#include "core/cpu_features.h"
#include "core/log.h"
#include "kernels/kernels.h"
#include "kube/replica_actuator.h"

namespace keel::control {
namespace {

// --nodes auto: the autoscaler's scale-outs placed through the agents (each TE a gang of one, or
// of two with its stage 1 under --pp 2, `<model>-te-<manager id>-s<k>`; after one that does not
// fit, none for 2 s), its drained TEs stopped through them (a stage 1 exits with its stage 0).
void scale_through_agents(ClusterNodes& nodes, ClusterMembership* members,
                          const ClusterUpOptions& o, const std::string& path,
                          const std::string& name, ClusterAutoscalerConfig* c) {
  auto next = std::make_shared<int>(0);
  // After a scale-out that did not fit, the next try waits (the decision repeats every tick).
  auto retry_at = std::make_shared<std::chrono::steady_clock::time_point>();
  c->start_remote = [&nodes, members, &o, path, name, next, retry_at](
                        int32_t n, cluster::TeRole te_role) -> Result<std::vector<std::string>> {
    const std::string role(cluster::te_role_name(te_role));
    if (std::chrono::steady_clock::now() < *retry_at) return std::vector<std::string>{};
    const std::string manager = members->manager_id();
    std::vector<std::string> out;
    Status last;
    for (int32_t k = 0; k < n; ++k) {
      const std::string id = name + "-te-" + manager + "-s" + std::to_string((*next)++);
      cluster::StartTe s{
          id, path, name, role, threads_per_te(o), o.serve.compute.isa, te_engine_spec(o, role)};
      s.memory_bytes = te_memory_bytes(o, path);
      // A pipelined TE goes with its stage 1, an expert-parallel one with its members, started
      // first (they exit with it).
      const GangStart gang = control::gang_of(id, o.priority, std::move(s));
      Result<std::vector<RemoteTe>> tes = nodes.start_gang(members->session(), gang);
      if (!tes.ok()) {
        last = tes.status();
        break;  // the hosts are full: later ones would not fit either
      }
      for (const RemoteTe& te : *tes) {
        if (control::is_te_role(te.role)) out.push_back(te.address);
      }
    }
    if (!last.ok()) *retry_at = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    if (out.empty() && !last.ok()) return last;
    return out;
  };
  c->stop_remote = [&nodes](const std::string& id, std::chrono::milliseconds grace) {
    return nodes.stop_te(id, grace);
  };
}

}  // namespace

// The scale-out side (--warm-pool): preload into the store, the warm pool, the control port.
Result<std::unique_ptr<ClusterScaler>> start_scaler(proc::ProcessSupervisor& sup,
                                                    const ClusterUpOptions& o,
                                                    const std::vector<std::string>& keel,
                                                    const std::string& path,
                                                    const std::string& name) {
  ClusterScalerConfig c;
  c.warm_pool = o.warm_pool;
  c.store_dir = o.store_dir;
  c.store_budget = o.store_budget;
  c.rate_half_life_s = o.forecast_half_life_s;
  c.min_rate = o.forecast_min_rate;
  c.event_log = o.event_log;
  c.keel_command = keel;
  c.warm_te = warm_te_spec(o, path, name, threads_per_te(o));
  c.model_path = path;
  for (const auto role : {cluster::TeRole::kPrefill, cluster::TeRole::kDecode}) {
    c.role_engine[role] = te_engine_spec(o, std::string(cluster::te_role_name(role)));
  }
  c.bind_source =
      cluster::parse_bind_source_mode(o.bind_source).value_or(cluster::BindSourceMode::kAuto);
  c.te_store_root = o.te_stores;
  KEEL_ASSIGN_OR_RETURN(kernels::Isa isa,
                        o.serve.compute.isa.empty()
                            ? kernels::choose_isa_from_env(detect_cpu_features())
                            : kernels::choose_isa(detect_cpu_features(), o.serve.compute.isa));
  c.isa = std::string(kernels::isa_name(isa));
  c.start_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.start_timeout_s * 1000));
  return ClusterScaler::start(&sup, std::move(c));
}

// The autoscaler's groups: colocated (--max), prefill (--max-prefill: the TTFT objective its
// signal) and decode (--max-decode: the TPOT one), each whose max is > 0.
std::vector<AutoscaleGroupConfig> autoscale_groups(const AutoscaleOptions& a) {
  cluster::autoscale::AutoscalerConfig base;
  base.target_concurrency = a.target_concurrency;
  base.stable_window_s = a.stable_window_s;
  base.panic_window_s = a.panic_window_s > 0 ? a.panic_window_s : a.stable_window_s / 10;
  base.scale_down_delay_s = a.scale_down_delay_s;
  base.scale_to_zero_grace_s = a.scale_to_zero_grace_s;
  base.ttft_slo_s = a.ttft_slo_ms / 1000.0;
  base.tpot_slo_s = a.tpot_slo_ms / 1000.0;
  std::vector<AutoscaleGroupConfig> groups;
  const auto add = [&](cluster::TeRole role, int32_t min, int32_t max, double target) {
    if (max <= 0) return;
    AutoscaleGroupConfig g{role, base};
    g.policy.min_replicas = min;
    g.policy.max_replicas = max;
    if (target > 0) g.policy.target_concurrency = target;
    if (role == cluster::TeRole::kPrefill) g.policy.tpot_slo_s = 0;  // no token after the first
    if (role == cluster::TeRole::kDecode) g.policy.ttft_slo_s = 0;   // the first came from prefill
    groups.push_back(g);
  };
  add(cluster::TeRole::kColocated, a.min_replicas, a.max_replicas, 0);
  add(cluster::TeRole::kPrefill, a.min_prefill, a.max_prefill, a.prefill_target_concurrency);
  add(cluster::TeRole::kDecode, a.min_decode, a.max_decode, a.decode_target_concurrency);
  return groups;
}

Result<std::unique_ptr<ClusterAutoscaler>> start_autoscaler(
    const ClusterUpOptions& o, const std::vector<std::string>& je_addresses,
    const std::string& path, const std::string& name, proc::ProcessSupervisor& sup,
    ClusterScaler* scaler, cluster::FleetClient* fleet, ClusterNodes& nodes,
    ClusterMembership* members) {
  const AutoscaleOptions& a = o.autoscale;
  ClusterAutoscalerConfig c;
  c.groups = autoscale_groups(o.autoscale);
  c.model = name;
  c.drain_timeout = std::chrono::milliseconds(static_cast<int64_t>(a.drain_timeout_s * 1000));
  c.je_addresses = je_addresses;
  c.event_log = o.event_log;
  if (o.nodes == "auto") scale_through_agents(nodes, members, o, path, name, &c);
  std::unique_ptr<kube::ReplicaActuator> actuator;
  if (a.scaler == "k8s") {
    kube::KubeConfigOverrides k{a.k8s_api, a.k8s_token_file, a.k8s_namespace};
    KEEL_ASSIGN_OR_RETURN(actuator, kube::open_replica_actuator(k, a.k8s_deployment));
    KEEL_LOG_INFO("cluster: autoscaler sets the replicas of deployment {} (now {})",
                  a.k8s_deployment, *actuator->known_replicas());
  } else if (o.warm_pool == 0) {
    KEEL_LOG_INFO("cluster: --max without --warm-pool: each scale-out cold-starts its TEs");
  }
  return ClusterAutoscaler::start(std::move(c), &sup, scaler, fleet, std::move(actuator));
}

}  // namespace keel::control
