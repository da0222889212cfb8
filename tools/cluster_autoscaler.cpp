// ClusterAutoscaler (see cluster_autoscaler.h).
#include "cluster_autoscaler.h"

#include <fmt/format.h>

#include <algorithm>

#include "cluster/je_calls.h"
#include "cluster/link.h"
#include "cluster/messages.h"
#include "cluster/slo_count.h"
#include "core/log.h"

namespace keel::cli {

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

ClusterAutoscaler::ClusterAutoscaler(ClusterAutoscalerConfig config,
                                     cluster::ProcessSupervisor* sup, ClusterScaler* scaler,
                                     cluster::FleetClient* fleet)
    : config_(std::move(config)), sup_(sup), scaler_(scaler), fleet_(fleet), start_(Clock::now()) {}

Result<std::unique_ptr<ClusterAutoscaler>> ClusterAutoscaler::start(
    ClusterAutoscalerConfig config, cluster::ProcessSupervisor* sup, ClusterScaler* scaler,
    cluster::FleetClient* fleet, std::unique_ptr<kube::ReplicaActuator> actuator) {
  KEEL_TRY(config.policy.validate());
  std::unique_ptr<ClusterAutoscaler> a(
      new ClusterAutoscaler(std::move(config), sup, scaler, fleet));
  a->actuator_ = std::move(actuator);
  if (!a->config_.event_log.empty()) {
    a->log_.emplace(a->config_.event_log, std::ios::app);
    if (!*a->log_) return Status::io_error(a->config_.event_log + ": cannot open the event log");
  }
  return a;
}

as::GroupSignals ClusterAutoscaler::signals(const cluster::FleetStatus& status, double now_s) {
  as::GroupSignals s;
  s.now_s = now_s;
  int64_t at_tes = 0;
  std::map<std::string, engine::MetricsSnapshot> seen;
  for (size_t i = 0; i < status.fleet.tes.size(); ++i) {
    const cluster::TeInfo& te = status.fleet.tes[i];
    if (!te.healthy || te.model != config_.model || te.role != cluster::TeRole::kColocated) {
      continue;
    }
    if (stopped_.count(te.address) != 0) continue;  // the JE has not seen it go yet
    at_tes += te_requests(te);
    if (draining_.count(te.address) != 0) continue;
    s.tes.push_back(te);
    if (i >= status.metrics.size()) continue;
    const engine::MetricsSnapshot& m = status.metrics[i];
    const engine::MetricsSnapshot& before = last_metrics_[te.id];
    if (config_.policy.ttft_slo_s > 0) {
      const as::SloCount c =
          as::count_within(before.time_to_first_token_seconds, m.time_to_first_token_seconds,
                           config_.policy.ttft_slo_s);
      s.ttft.met += c.met;
      s.ttft.total += c.total;
    }
    if (config_.policy.tpot_slo_s > 0) {
      const as::SloCount c =
          as::count_within(before.inter_token_latency_seconds, m.inter_token_latency_seconds,
                           config_.policy.tpot_slo_s);
      s.tpot.met += c.met;
      s.tpot.total += c.total;
    }
    seen[te.id] = m;
  }
  last_metrics_ = std::move(seen);
  // Bound TEs count from the bind until their first report makes them healthy (30 s at most).
  for (auto it = bound_.begin(); it != bound_.end();) {
    const cluster::TeInfo* te = find_by_address(status, it->first);
    if ((te != nullptr && te->healthy) || Clock::now() - it->second > std::chrono::seconds(30)) {
      it = bound_.erase(it);
    } else {
      ++s.pending;
      ++it;
    }
  }
  s.held = fleet_->num_held();
  if (s.tes.empty()) {
    // No ready TE: every request the gateway has not placed waits for one, including one whose
    // first try has not yet come back Unavailable (the gateway counts it held only after that).
    s.held = std::max(s.held, static_cast<int64_t>(fleet_->num_jobs()) - at_tes);
  }
  // The gateway's count covers requests between the JE and a TE's first report too.
  s.in_flight = std::max(at_tes, static_cast<int64_t>(fleet_->num_jobs()) - s.held);
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
  as::GroupSignals s = signals(*status, now_s);
  if (actuator_ && actuator_->known_replicas()) {
    // Pods the Deployment asks for that are not ready TEs yet count as replicas.
    s.pending = std::max(0, *actuator_->known_replicas() - static_cast<int32_t>(s.tes.size()));
  }
  const as::ScaleDecision d = as::decide(s, config_.policy, state_);
  {
    std::lock_guard lock(mu_);
    desired_ = d.desired;
    ready_ = static_cast<int32_t>(s.tes.size());
    held_ = s.held;
    panic_ = d.panic;
    if (d.desired != d.current) ++decisions_[std::string(as::scale_reason_name(d.reason))];
  }
  if (d.desired != d.current || d.panic != last_panic_) {
    log_decision(d, now_s);
    KEEL_LOG_INFO("cluster: autoscale {} → {} TEs ({}; concurrency {:.1f}, held {}{})", d.current,
                  d.desired, as::scale_reason_name(d.reason), d.concurrency, s.held,
                  d.panic ? ", panic" : "");
  }
  last_panic_ = d.panic;
  if (actuator_) return set_replicas(d);
  if (d.scale_out > 0) scale_out(d.scale_out);
  for (const std::string& id : d.drain) {
    for (const cluster::TeInfo& te : s.tes) {
      if (te.id == id) start_drain(te);
    }
  }
}

void ClusterAutoscaler::scale_out(int32_t n) {
  if (config_.start_remote) {
    Result<std::vector<std::string>> started = config_.start_remote(n);
    if (!started.ok()) {
      KEEL_LOG_WARN("cluster: autoscale scale-out of {} through the agents: {}", n,
                    started.status().to_string());
      return;
    }
    for (const std::string& address : *started) bound_[address] = Clock::now();
    return;
  }
  const cluster::Json reply = scaler_->scale_out(n);
  for (const cluster::Json& te : reply.value("tes", cluster::Json::array())) {
    if (te.contains("address") && te["address"].is_string()) {
      bound_[te["address"].get<std::string>()] = Clock::now();
    }
  }
  if (reply.contains("errors")) {
    KEEL_LOG_WARN("cluster: autoscale scale-out of {}: {}", n, reply["errors"].dump());
  }
}

void ClusterAutoscaler::set_replicas(const as::ScaleDecision& d) {
  const std::optional<int32_t> before = actuator_->known_replicas();
  Result<bool> wrote = actuator_->apply(d.desired, Clock::now());
  if (wrote.ok() && !*wrote) return;  // the same count, or backing off after a failure
  const std::string outcome = wrote.ok() ? "ok" : "error";
  {
    std::lock_guard lock(mu_);
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
    Result<std::shared_ptr<cluster::Link>> link = cluster::Link::connect(
        je, std::chrono::milliseconds(5000), [](cluster::Link&, cluster::Message) {}, nullptr);
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
  draining_[te.address] = Draining{te.id, te.address, te.pid, Clock::now()};
  log_event({{"event", "drain"},
             {"phase", "start"},
             {"te", te.id},
             {"address", te.address},
             {"pid", te.pid},
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
      const Result<cluster::ChildExit> exit = sup_->stop(static_cast<pid_t>(d.pid), kStopGrace);
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
               {"outcome", outcome},
               {"left_requests", te != nullptr ? te_requests(*te) : 0},
               {"drain_s", std::chrono::duration<double>(waited).count()},
               {"exit", exit_text}});
    KEEL_LOG_INFO("cluster: drained {} ({}) in {:.2f} s: stopped ({})", d.id, outcome,
                  std::chrono::duration<double>(waited).count(), exit_text);
    {
      std::lock_guard lock(mu_);
      ++drains_[outcome];
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

void ClusterAutoscaler::log_decision(const as::ScaleDecision& d, double now_s) {
  cluster::Json drain = cluster::Json::array();
  for (const std::string& id : d.drain) drain.push_back(id);
  log_event({{"event", "autoscale"},
             {"decision_t_s", now_s},
             {"model", config_.model},
             {"role", "colocated"},
             {"current", d.current},
             {"desired", d.desired},
             {"reason", std::string(as::scale_reason_name(d.reason))},
             {"panic", d.panic},
             {"signals",
              {{"concurrency", d.concurrency},
               {"stable_concurrency", d.stable_concurrency},
               {"panic_concurrency", d.panic_concurrency},
               {"held", held_},
               {"kv_use", d.kv_use},
               {"ttft_attainment", d.ttft_attainment},
               {"tpot_attainment", d.tpot_attainment}}},
             {"scale_out", d.scale_out},
             {"drain", std::move(drain)}});
}

std::string ClusterAutoscaler::metrics_text() const {
  std::lock_guard lock(mu_);
  const std::string labels = fmt::format("model_name=\"{}\",role=\"colocated\"", config_.model);
  std::string out;
  out += "# TYPE keel:autoscaler_desired_replicas gauge\n";
  out += fmt::format("keel:autoscaler_desired_replicas{{{}}} {}\n", labels, desired_);
  out += "# TYPE keel:autoscaler_ready_replicas gauge\n";
  out += fmt::format("keel:autoscaler_ready_replicas{{{}}} {}\n", labels, ready_);
  out += "# TYPE keel:autoscaler_held_requests gauge\n";
  out += fmt::format("keel:autoscaler_held_requests{{{}}} {}\n", labels, held_);
  out += "# TYPE keel:autoscaler_panic gauge\n";
  out += fmt::format("keel:autoscaler_panic{{{}}} {}\n", labels, panic_ ? 1 : 0);
  out += "# TYPE keel:autoscaler_decisions_total counter\n";
  for (const auto& [reason, n] : decisions_) {
    out +=
        fmt::format("keel:autoscaler_decisions_total{{{},reason=\"{}\"}} {}\n", labels, reason, n);
  }
  out += "# TYPE keel:autoscaler_drains_total counter\n";
  for (const auto& [outcome, n] : drains_) {
    out +=
        fmt::format("keel:autoscaler_drains_total{{{},outcome=\"{}\"}} {}\n", labels, outcome, n);
  }
  if (actuator_) {
    out += "# TYPE keel:autoscaler_k8s_replica_writes_total counter\n";
    for (const auto& [outcome, n] : k8s_writes_) {
      out += fmt::format("keel:autoscaler_k8s_replica_writes_total{{{},outcome=\"{}\"}} {}\n",
                         labels, outcome, n);
    }
  }
  return out;
}

}  // namespace keel::cli
