// ClusterAutoscaler (see cluster_autoscaler.h).
#include "control/autoscale/cluster_autoscaler.h"

#include <fmt/format.h>

#include <algorithm>

#include "cluster/policy/autoscale_signals.h"
#include "cluster/protocol/je_calls.h"
#include "cluster/protocol/messages.h"
#include "core/log.h"
#include "net/link.h"

namespace keel::control {

namespace as = cluster::autoscale;
using Clock = std::chrono::steady_clock;

namespace {

constexpr auto kMinDrainWait = std::chrono::milliseconds(200);  // ≥ 2 TE report intervals
constexpr auto kStopGrace = std::chrono::milliseconds(5000);

int64_t te_requests(const cluster::TeInfo& te) {
  return int64_t{te.load.num_waiting} + te.load.num_running;
}

const cluster::TeInfo* find_by_address(const cluster::FleetStatus& s, const std::string& address) {
  for (const cluster::TeInfo& te : s.fleet.tes) {
    if (te.address == address) return &te;
  }
  return nullptr;
}

}  // namespace

ClusterAutoscaler::ClusterAutoscaler(ClusterAutoscalerConfig config, proc::ProcessSupervisor* sup,
                                     ClusterScaler* scaler, cluster::FleetClient* fleet)
    : config_(std::move(config)), sup_(sup), scaler_(scaler), fleet_(fleet), start_(Clock::now()) {}

Result<std::unique_ptr<ClusterAutoscaler>> ClusterAutoscaler::start(
    ClusterAutoscalerConfig config, proc::ProcessSupervisor* sup, ClusterScaler* scaler,
    cluster::FleetClient* fleet, std::unique_ptr<kube::ReplicaActuator> actuator) {
  if (config.groups.empty()) return Status::invalid_argument("autoscaler: no group to scale");
  std::set<cluster::TeRole> roles;
  for (const AutoscaleGroupConfig& g : config.groups) {
    KEEL_TRY(g.policy.validate());
    if (!roles.insert(g.role).second) {
      return Status::invalid_argument(
          fmt::format("autoscaler: two groups of role {}", cluster::te_role_name(g.role)));
    }
  }
  if (actuator &&
      (config.groups.size() != 1 || config.groups[0].role != cluster::TeRole::kColocated)) {
    return Status::invalid_argument(
        "autoscaler: a Deployment's replicas scale one colocated group, not prefill and decode "
        "apart");
  }
  std::unique_ptr<ClusterAutoscaler> a(
      new ClusterAutoscaler(std::move(config), sup, scaler, fleet));
  a->actuator_ = std::move(actuator);
  for (const AutoscaleGroupConfig& g : a->config_.groups) {
    Group group;
    group.idx = a->groups_.size();
    group.config = g;
    a->groups_.push_back(std::move(group));
    MutexLock lock(a->mu_);
    a->gauges_.push_back(GroupGauges{.role = g.role});
  }
  if (!a->config_.event_log.empty()) {
    a->log_.emplace(a->config_.event_log, std::ios::app);
    if (!*a->log_) return Status::io_error(a->config_.event_log + ": cannot open the event log");
  }
  return a;
}

as::GroupSignals ClusterAutoscaler::signals(Group& g, const cluster::FleetStatus& status,
                                            const std::set<std::string>& draining, double now_s) {
  const as::GatewayCounts gateway{static_cast<int64_t>(fleet_->num_jobs()), fleet_->num_held()};
  as::GroupSignals s = as::group_signals(status, {config_.model, g.config.role}, g.config.policy,
                                         {&draining, &stopped_}, gateway, now_s, &g.last_metrics);
  // Bound TEs count from the bind until their first report makes them healthy (30 s at most).
  for (auto it = g.bound.begin(); it != g.bound.end();) {
    const cluster::TeInfo* te = find_by_address(status, it->first);
    if ((te != nullptr && te->healthy) || Clock::now() - it->second > std::chrono::seconds(30)) {
      it = g.bound.erase(it);
    } else {
      ++s.pending;
      ++it;
    }
  }
  return s;
}

void ClusterAutoscaler::tick() {
  const Clock::time_point now = Clock::now();
  if (now - last_tick_ < config_.interval) return;
  last_tick_ = now;
  Result<cluster::FleetStatus> status = fleet_->fleet_status();
  if (!status.ok()) return;
  progress_drains(*status);
  const double now_s = std::chrono::duration<double>(now - start_).count();
  std::set<std::string> draining;
  for (const auto& [address, d] : draining_) draining.insert(address);
  for (Group& g : groups_) tick_group(g, *status, now_s, draining);
}

void ClusterAutoscaler::tick_group(Group& g, const cluster::FleetStatus& status, double now_s,
                                   const std::set<std::string>& draining) {
  as::GroupSignals s = signals(g, status, draining, now_s);
  if (actuator_ && actuator_->known_replicas()) {
    // Pods the Deployment asks for that are not ready TEs yet count as replicas.
    s.pending = std::max(0, *actuator_->known_replicas() - static_cast<int32_t>(s.tes.size()));
  }
  const as::ScaleDecision d = as::decide(s, g.config.policy, g.state);
  {
    MutexLock lock(mu_);
    GroupGauges& gauges = gauges_[g.idx];
    gauges.desired = d.desired;
    gauges.ready = static_cast<int32_t>(s.tes.size());
    gauges.held = s.held;
    gauges.panic = d.panic;
    if (d.desired != d.current) ++gauges.decisions[std::string(as::scale_reason_name(d.reason))];
  }
  if (d.desired != d.current || d.panic != g.last_panic) {
    log_decision(g, d, s.held, now_s);
    KEEL_LOG_INFO("cluster: autoscale {} {} → {} TEs ({}; concurrency {:.1f}, held {}{})",
                  cluster::te_role_name(g.config.role), d.current, d.desired,
                  as::scale_reason_name(d.reason), d.concurrency, s.held, d.panic ? ", panic" : "");
  }
  g.last_panic = d.panic;
  if (actuator_) return set_replicas(d);
  if (d.scale_out > 0) scale_out(g, d.scale_out);
  for (const std::string& id : d.drain) {
    for (const cluster::TeInfo& te : s.tes) {
      if (te.id == id) start_drain(te);
    }
  }
}

void ClusterAutoscaler::scale_out(Group& g, int32_t n) {
  const std::string_view role = cluster::te_role_name(g.config.role);
  if (config_.start_remote) {
    Result<std::vector<std::string>> started = config_.start_remote(n, g.config.role);
    if (!started.ok()) {
      KEEL_LOG_WARN("cluster: autoscale {} scale-out of {} through the agents: {}", role, n,
                    started.status().to_string());
      return;
    }
    for (const std::string& address : *started) g.bound[address] = Clock::now();
    return;
  }
  const cluster::Json reply = scaler_->scale_out(n, g.config.role);
  for (const cluster::Json& te : reply.value("tes", cluster::Json::array())) {
    if (te.contains("address") && te["address"].is_string()) {
      g.bound[te["address"].get<std::string>()] = Clock::now();
    }
  }
  if (reply.contains("errors")) {
    KEEL_LOG_WARN("cluster: autoscale {} scale-out of {}: {}", role, n, reply["errors"].dump());
  }
}

void ClusterAutoscaler::set_replicas(const as::ScaleDecision& d) {
  const std::optional<int32_t> before = actuator_->known_replicas();
  Result<bool> wrote = actuator_->apply(d.desired, Clock::now());
  if (wrote.ok() && !*wrote) return;  // the same count, or backing off after a failure
  const std::string outcome = wrote.ok() ? "ok" : "error";
  {
    MutexLock lock(mu_);
    ++k8s_writes_[outcome];
  }
  cluster::Json e = {{"event", "k8s_scale"},
                     {"deployment", actuator_->deployment()},
                     {"previous", before ? cluster::Json(*before) : cluster::Json()},
                     {"replicas", d.desired},
                     {"reason", std::string(as::scale_reason_name(d.reason))},
                     {"outcome", outcome}};
  if (!wrote.ok()) {
    e["error"] = wrote.status().message();
    KEEL_LOG_WARN("cluster: autoscale: {} replicas → {}: {}", actuator_->deployment(), d.desired,
                  wrote.status().message());
  } else {
    KEEL_LOG_INFO("cluster: autoscale: {} replicas {} → {}", actuator_->deployment(),
                  before ? std::to_string(*before) : "?", d.desired);
  }
  log_event(e);
}

void ClusterAutoscaler::start_drain(const cluster::TeInfo& te) {
  for (const std::string& je : config_.je_addresses) {
    Result<std::shared_ptr<net::Link>> link = net::Link::connect(
        je, std::chrono::milliseconds(5000), [](net::Link&, net::Message) {}, nullptr);
    if (!link.ok()) {
      KEEL_LOG_WARN("cluster: drain {}: JE {}: {}", te.id, je, link.status().message());
      continue;
    }
    Result<cluster::Json> reply = (*link)->call(cluster::encode(cluster::RemoveTe{te.address}),
                                                std::chrono::milliseconds(5000));
    (*link)->close();
    const Status st = reply.ok() ? cluster::decode_status_body(*reply) : reply.status();
    if (!st.ok()) KEEL_LOG_WARN("cluster: drain {}: JE {}: {}", te.id, je, st.message());
  }
  draining_[te.address] = Draining{te.id, te.address, te.pid, te.role, Clock::now()};
  log_event({{"event", "drain"},
             {"phase", "start"},
             {"te", te.id},
             {"address", te.address},
             {"pid", te.pid},
             {"role", std::string(cluster::te_role_name(te.role))},
             {"requests", te_requests(te)}});
}

void ClusterAutoscaler::progress_drains(const cluster::FleetStatus& status) {
  const Clock::time_point now = Clock::now();
  for (auto it = draining_.begin(); it != draining_.end();) {
    const Draining& d = it->second;
    const cluster::TeInfo* te = find_by_address(status, d.address);
    const auto waited = now - d.since;
    std::string outcome;
    if (te == nullptr || !te->healthy) {
      outcome = "gone";
    } else if (waited >= kMinDrainWait && te_requests(*te) == 0) {
      outcome = "idle";
    } else if (waited >= config_.drain_timeout) {
      outcome = "timeout";  // its work is re-driven once the JEs see it gone
    }
    if (outcome.empty()) {
      ++it;
      continue;
    }
    std::string exit_text = "no pid";  // how it ended
    if (config_.stop_remote) {         // through its host's agent
      const Status s = config_.stop_remote(d.id, kStopGrace);
      exit_text = s.ok() ? "stopped by its node agent" : s.message();
    } else if (d.pid > 0) {
      const Result<proc::ChildExit> exit = sup_->stop(static_cast<pid_t>(d.pid), kStopGrace);
      exit_text = exit.ok() ? exit->describe() : exit.status().message();
    }
    // Stopped: it leaves the JEs' fleet lists (not kept there as dead).
    if (Status s = cluster::call_jes(config_.je_addresses,
                                     cluster::encode(cluster::RemoveTe{d.address, true}),
                                     std::chrono::milliseconds(5000));
        !s.ok()) {
      KEEL_LOG_WARN("cluster: drain {}: removing it from the JEs: {}", d.id, s.message());
    }
    log_event({{"event", "drain"},
               {"phase", "stopped"},
               {"te", d.id},
               {"address", d.address},
               {"pid", d.pid},
               {"role", std::string(cluster::te_role_name(d.role))},
               {"outcome", outcome},
               {"left_requests", te != nullptr ? te_requests(*te) : 0},
               {"drain_s", std::chrono::duration<double>(waited).count()},
               {"exit", exit_text}});
    KEEL_LOG_INFO("cluster: drained {} ({}) in {:.2f} s: stopped ({})", d.id, outcome,
                  std::chrono::duration<double>(waited).count(), exit_text);
    {
      MutexLock lock(mu_);
      ++drains_[{std::string(cluster::te_role_name(d.role)), outcome}];
    }
    stopped_.insert(d.address);
    it = draining_.erase(it);
  }
}

void ClusterAutoscaler::log_event(const cluster::Json& event) {
  if (!log_) return;
  cluster::Json e = event;
  e["t_s"] = std::chrono::duration<double>(Clock::now() - start_).count();
  *log_ << e.dump() << "\n" << std::flush;
}

void ClusterAutoscaler::log_decision(const Group& g, const as::ScaleDecision& d, int64_t held,
                                     double now_s) {
  cluster::Json drain = cluster::Json::array();
  for (const std::string& id : d.drain) drain.push_back(id);
  log_event({{"event", "autoscale"},
             {"decision_t_s", now_s},
             {"model", config_.model},
             {"role", std::string(cluster::te_role_name(g.config.role))},
             {"current", d.current},
             {"desired", d.desired},
             {"reason", std::string(as::scale_reason_name(d.reason))},
             {"panic", d.panic},
             {"signals",
              {{"concurrency", d.concurrency},
               {"stable_concurrency", d.stable_concurrency},
               {"panic_concurrency", d.panic_concurrency},
               {"held", held},
               {"kv_use", d.kv_use},
               {"ttft_attainment", d.ttft_attainment},
               {"tpot_attainment", d.tpot_attainment}}},
             {"scale_out", d.scale_out},
             {"drain", std::move(drain)}});
}

std::string ClusterAutoscaler::metrics_text() const {
  MutexLock lock(mu_);
  const auto labels = [&](std::string_view role) {
    return fmt::format("model_name=\"{}\",role=\"{}\"", config_.model, role);
  };
  // gauges_ is passed in: the analysis does not see the lock from inside a lambda.
  const auto gauge = [&labels](const std::vector<GroupGauges>& groups, std::string_view name,
                               auto value_of) {
    std::string out = fmt::format("# TYPE keel:autoscaler_{} gauge\n", name);
    for (const GroupGauges& g : groups) {
      out += fmt::format("keel:autoscaler_{}{{{}}} {}\n", name,
                         labels(cluster::te_role_name(g.role)), value_of(g));
    }
    return out;
  };
  std::string out;
  out += gauge(gauges_, "desired_replicas", [](const GroupGauges& g) { return g.desired; });
  out += gauge(gauges_, "ready_replicas", [](const GroupGauges& g) { return g.ready; });
  out += gauge(gauges_, "held_requests", [](const GroupGauges& g) { return g.held; });
  out += gauge(gauges_, "panic", [](const GroupGauges& g) { return g.panic ? 1 : 0; });
  out += "# TYPE keel:autoscaler_decisions_total counter\n";
  for (const GroupGauges& g : gauges_) {
    for (const auto& [reason, n] : g.decisions) {
      out += fmt::format("keel:autoscaler_decisions_total{{{},reason=\"{}\"}} {}\n",
                         labels(cluster::te_role_name(g.role)), reason, n);
    }
  }
  out += "# TYPE keel:autoscaler_drains_total counter\n";
  for (const auto& [key, n] : drains_) {
    out += fmt::format("keel:autoscaler_drains_total{{{},outcome=\"{}\"}} {}\n", labels(key.first),
                       key.second, n);
  }
  if (actuator_) {
    out += "# TYPE keel:autoscaler_k8s_replica_writes_total counter\n";
    for (const auto& [outcome, n] : k8s_writes_) {
      out += fmt::format("keel:autoscaler_k8s_replica_writes_total{{{},outcome=\"{}\"}} {}\n",
                         labels("colocated"), outcome, n);
    }
  }
  return out;
}

}  // namespace keel::control
