// GangWatch; see gang_watch.h.
#include "control/placement/gang_watch.h"

#include <algorithm>

#include "core/log.h"

namespace keel::control {

GangWatch::GangWatch(ClusterNodes* nodes, GangWatchConfig config)
    : nodes_(nodes), config_(std::move(config)), clock_(config_.clock ? config_.clock : &steady_) {}

std::vector<cluster::WatchedProcess>& GangWatch::watched(const std::string& instance,
                                                         const PlacedGang& gang) {
  std::vector<cluster::WatchedProcess>& w = state_[instance];
  const bool same = w.size() == gang.processes.size() &&
                    std::equal(w.begin(), w.end(), gang.processes.begin(),
                               [](const auto& a, const RemoteTe& b) { return a.id == b.id; });
  if (!same) {  // a gang placed (or placed again) since the last check
    w.clear();
    for (const RemoteTe& p : gang.processes) w.push_back({p.id, p.host_id});
  }
  first_.emplace(instance, gang.start);
  return w;
}

GangWatch::~GangWatch() { settle(); }

void GangWatch::settle() {
  if (listing_.valid()) (void)listing_.get();
}

void GangWatch::tick(membership::Membership& session) {
  if (listing_.valid()) {  // a background listing: checked once it is there
    if (listing_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    const Result<std::vector<cluster::NodeCapacity>> nodes = listing_.get();
    check(session, nodes);
    return;
  }
  const int64_t now = clock_->now_ns();
  if (now < next_check_ns_) return;
  next_check_ns_ =
      now + std::chrono::duration_cast<std::chrono::nanoseconds>(config_.period).count();
  if (nodes_->placed_gangs().empty()) return;
  if (config_.background) {
    membership::Membership* s = &session;
    listing_ = std::async(std::launch::async, [s] { return ClusterNodes::list(*s); });
    return;
  }
  check(session, ClusterNodes::list(session));
}

void GangWatch::check(membership::Membership& session,
                      const Result<std::vector<cluster::NodeCapacity>>& nodes) {
  if (!nodes.ok()) {
    KEEL_LOG_WARN("cluster: gangs not checked: {}", nodes.status().to_string());
    return;
  }
  std::vector<cluster::HostProcesses> hosts;
  for (const cluster::NodeCapacity& n : *nodes) {
    cluster::HostProcesses h{n.host_id, {}, n.stopped};
    for (const cluster::HostedTe& t : n.tes) h.running.push_back(t.id);
    hosts.push_back(std::move(h));
  }
  std::vector<std::pair<std::string, cluster::GangCheck>> broken;
  for (const auto& [instance, gang] : nodes_->placed_gangs()) {
    if (!serves_together(gang.start)) continue;
    cluster::GangCheck c =
        cluster::check_gang(watched(instance, gang), hosts, config_.max_unseen_checks);
    if (!c.lost.empty() || !c.stopped.empty()) broken.emplace_back(instance, std::move(c));
  }
  std::erase_if(state_, [&](const auto& s) { return !nodes_->placed_gangs().contains(s.first); });
  for (const auto& [instance, c] : broken) {
    if (c.stopped.empty()) {
      replace(session, instance, c.lost);
    } else {
      stopped(session, instance, c.stopped);
    }
  }
}

void GangWatch::stopped(membership::Membership& session, const std::string& instance,
                        const std::vector<std::string>& ids) {
  ++stopped_;
  KEEL_LOG_WARN(
      "cluster: gang {}: {} stopped by a manager's command (an eviction?): the rest of "
      "the gang is stopped too, and not replaced",
      instance, cluster::Json(ids).dump());
  nodes_->log_event({{"event", "gang_stopped"}, {"instance", instance}, {"stopped", ids}});
  if (Status s = nodes_->stop_gang(instance, std::chrono::milliseconds(1000), &session); !s.ok()) {
    KEEL_LOG_WARN("cluster: gang {}: {}", instance, s.to_string());
  }
  state_.erase(instance);
}

void GangWatch::replace(membership::Membership& session, const std::string& instance,
                        const std::vector<std::string>& lost) {
  const int64_t t0 = clock_->now_ns();
  cluster::Json processes = cluster::Json::array();
  for (const RemoteTe& p : nodes_->placed_gangs().at(instance).processes) processes.push_back(p.id);
  ++lost_;
  KEEL_LOG_WARN("cluster: gang {} lost {} (of {}): replacing the whole gang", instance,
                cluster::Json(lost).dump(), processes.dump());
  nodes_->log_event(
      {{"event", "gang_lost"}, {"instance", instance}, {"lost", lost}, {"processes", processes}});
  // At once: a TE that lost a member or stage cannot serve; its JEs re-drive what it ran.
  if (Status s = nodes_->stop_gang(instance, std::chrono::milliseconds(0), &session); !s.ok()) {
    KEEL_LOG_WARN("cluster: gang {}: {}", instance, s.to_string());
  }
  state_.erase(instance);
  GangStart next = first_.at(instance);
  const std::string suffix = "-r" + std::to_string(++generation_[instance]);
  for (cluster::StartTe& t : next.tes) t.id += suffix;
  Result<std::vector<RemoteTe>> started = nodes_->start_gang(session, next);
  if (!started.ok()) {
    ++replace_failed_;
    KEEL_LOG_ERROR("cluster: gang {} not replaced: {}", instance, started.status().to_string());
    nodes_->log_event({{"event", "gang_replace_failed"},
                       {"instance", instance},
                       {"reason", started.status().message()}});
    return;
  }
  ++replaced_;
  cluster::Json ids = cluster::Json::array();
  for (const RemoteTe& p : *started) ids.push_back(p.id);
  const double seconds = static_cast<double>(clock_->now_ns() - t0) * 1e-9;
  KEEL_LOG_INFO("cluster: gang {} replaced in {:.2f} s: {}", instance, seconds, ids.dump());
  nodes_->log_event({{"event", "gang_replaced"},
                     {"instance", instance},
                     {"processes", ids},
                     {"seconds", seconds}});
}

std::string GangWatch::metrics_text() const {
  const std::string labels = "{model_name=\"" + config_.model + "\"} ";
  return "# TYPE keel:gang_lost_total counter\nkeel:gang_lost_total" + labels +
         std::to_string(lost_.load()) +
         "\n# TYPE keel:gang_replaced_total counter\nkeel:gang_replaced_total" + labels +
         std::to_string(replaced_.load()) +
         "\n# TYPE keel:gang_replace_failed_total counter\nkeel:gang_replace_failed_total" +
         labels + std::to_string(replace_failed_.load()) +
         "\n# TYPE keel:gang_stopped_total counter\nkeel:gang_stopped_total" + labels +
         std::to_string(stopped_.load()) + "\n";
}

}  // namespace keel::control
