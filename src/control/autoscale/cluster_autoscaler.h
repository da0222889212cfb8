// ClusterAutoscaler: the cluster manager's autoscaler loop in `keel cluster up` — one group per
// role of the cluster's model: colocated (`--max N`), or prefill and decode apart
// (`--max-prefill`, `--max-decode`), each with its own policy, state and decisions. Each tick
// (every `interval`) it gathers each group's signals (cluster/policy/autoscale_signals.h: the fleet
// as the first JE sees it, the gateway's in-flight and held requests, the TEs' TTFT / inter-token
// histograms against the SLOs), runs the pure step cluster::autoscale::decide() per group, and
// applies the actions: a scale-out binds warm TEs to the group's role through the ClusterScaler
// (the same call as `keel cluster scale --role R`); a scale-in drains — remove_te to every
// JE (no new tasks), then, once the TE's load reports show no work (after at least two report
// intervals) or at the drain timeout, the TE is stopped by PID through the ProcessSupervisor (work
// still there is re-driven by the JEs, as for a dead TE) and removed from the JEs' fleet lists
// (remove_te with forget). A scale-out with no idle warm TE cold-starts one (ClusterScaler).
// Decisions that change the count go to the event log as `{"event":"autoscale","role":...}` lines;
// drains as `{"event":"drain",...}`; both to /metrics, labelled by role.
// Under `--nodes auto` the scale-outs and stops go through the node agents instead (the config's
// start_remote / stop_remote): the new TEs register themselves and the JEs follow them.
// With a kube::ReplicaActuator (`--scaler k8s`, docs/deploy.md) the same decisions set
// spec.replicas of a TE Deployment instead: the count the Deployment asks for and not yet ready
// counts as pending, nothing is bound or drained here (Kubernetes starts and deletes the pods;
// each pod's preStop hook drains its TE), and each write is a `{"event":"k8s_scale",...}` line.
// The actuator scales one Deployment: one colocated group only.
//
// Thread safety: tick() on the supervisor's thread (it spawns and stops children);
// metrics_text() from any thread.
#pragma once

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "cluster/gateway/fleet_client.h"
#include "cluster/policy/autoscaler.h"
#include "control/scaleout/cluster_scaler.h"
#include "core/mutex.h"
#include "kube/replica_actuator.h"
#include "proc/process_supervisor.h"

namespace keel::control {

// One group: the role it scales and its policy.
struct AutoscaleGroupConfig {
  cluster::TeRole role = cluster::TeRole::kColocated;
  cluster::autoscale::AutoscalerConfig policy;
};

struct ClusterAutoscalerConfig {
  std::vector<AutoscaleGroupConfig> groups;  // at most one per role
  std::string model;                         // the served model name (every group's)
  std::chrono::milliseconds interval{200};
  std::chrono::milliseconds drain_timeout{30000};
  std::vector<std::string> je_addresses;
  std::string event_log;  // JSON lines, appended; "" = none
  // --nodes auto: TEs come from and go back to the node agents (cluster_nodes.h), not the local
  // warm pool and supervisor. start_remote(n, role): the addresses of the TEs started (each
  // placed as a gang of one; an agent binds a warm TE of its pool when it has one);
  // stop_remote(id, grace).
  std::function<Result<std::vector<std::string>>(int32_t, cluster::TeRole)> start_remote;
  std::function<Status(const std::string&, std::chrono::milliseconds)> stop_remote;
};

class ClusterAutoscaler {
 public:
  using Clock = std::chrono::steady_clock;
  // sup, scaler and fleet are borrowed; they outlive this object. `actuator` (owned; may be null)
  // replaces binding and draining by writes of the Deployment's replica count.
  static Result<std::unique_ptr<ClusterAutoscaler>> start(
      ClusterAutoscalerConfig config, proc::ProcessSupervisor* sup, ClusterScaler* scaler,
      cluster::FleetClient* fleet, std::unique_ptr<kube::ReplicaActuator> actuator = nullptr);
  // One step when the interval has passed: signals → decide → actions; drains progress.
  void tick();
  [[nodiscard]] std::string metrics_text() const;

 private:
  struct Draining {
    std::string id;
    std::string address;
    int64_t pid = 0;
    cluster::TeRole role = cluster::TeRole::kColocated;
    Clock::time_point since;
  };
  // One group's step state (tick()'s thread only).
  struct Group {
    size_t idx = 0;  // its place in groups_, and of its gauges in gauges_
    AutoscaleGroupConfig config;
    cluster::autoscale::AutoscalerState state;
    std::map<std::string, Clock::time_point> bound;  // bound, not yet reported (by address)
    // The TEs' latency histograms at the previous tick (by TE id), for the SLO counts.
    std::map<std::string, engine::MetricsSnapshot> last_metrics;
    bool last_panic = false;
  };
  // What /metrics shows of a group: written by tick(), read by metrics_text() (under mu_).
  struct GroupGauges {
    cluster::TeRole role = cluster::TeRole::kColocated;
    int32_t desired = 0;
    int32_t ready = 0;
    int64_t held = 0;
    bool panic = false;
    std::map<std::string, int64_t> decisions;  // by reason, decisions that changed the count
  };
  ClusterAutoscaler(ClusterAutoscalerConfig config, proc::ProcessSupervisor* sup,
                    ClusterScaler* scaler, cluster::FleetClient* fleet);
  // `draining`: the addresses of the TEs being drained (draining_'s keys).
  void tick_group(Group& g, const cluster::FleetStatus& status, double now_s,
                  const std::set<std::string>& draining);
  cluster::autoscale::GroupSignals signals(Group& g, const cluster::FleetStatus& status,
                                           const std::set<std::string>& draining, double now_s);
  void scale_out(Group& g, int32_t n);
  void set_replicas(const cluster::autoscale::ScaleDecision& d);
  void start_drain(const cluster::TeInfo& te);
  void progress_drains(const cluster::FleetStatus& status);
  void log_event(const cluster::Json& event);
  void log_decision(const Group& g, const cluster::autoscale::ScaleDecision& d, int64_t held,
                    double now_s);

  ClusterAutoscalerConfig config_;
  proc::ProcessSupervisor* sup_;
  ClusterScaler* scaler_;
  cluster::FleetClient* fleet_;
  std::unique_ptr<kube::ReplicaActuator> actuator_;
  std::vector<Group> groups_;  // one per config_.groups entry, in order
  std::optional<std::ofstream> log_;
  Clock::time_point start_, last_tick_{};
  std::map<std::string, Draining> draining_;  // by TE address
  std::set<std::string> stopped_;  // drained and stopped (by address): never counted again

  mutable Mutex mu_;                                      // guards what metrics_text() reads
  std::vector<GroupGauges> gauges_ KEEL_GUARDED_BY(mu_);  // one per group, in groups_' order
  // By role, outcome.
  std::map<std::pair<std::string, std::string>, int64_t> drains_ KEEL_GUARDED_BY(mu_);
  // Replica writes by outcome: ok, error.
  std::map<std::string, int64_t> k8s_writes_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::control
