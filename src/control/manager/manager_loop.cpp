// The cluster manager's loop; see cluster_manager_loop.h.
#include "control/manager/manager_loop.h"

#include <chrono>
#include <ctime>

#include "core/log.h"

namespace keel::control {

bool ManagerRole::try_take_over(ClusterMembership& members) {
  Result<bool> won = members.try_lead();
  if (!won.ok()) {
    KEEL_LOG_WARN("cluster: standby: {}", won.status().to_string());
    return false;
  }
  if (!*won) return false;
  leading = true;
  const Status s = take_over ? take_over() : Status();
  if (!s.ok()) KEEL_LOG_ERROR("cluster: took over, but the TEs: {}", s.to_string());
  ++takeovers;  // counted once the take-over ran: the agents know this leader's token
  KEEL_LOG_INFO("cluster: this standby now leads: it manages the cluster's TEs");
  return true;
}

std::string ManagerRole::metrics_text(int64_t fencing_token) const {
  return "# TYPE keel:cluster_manager_leader gauge\nkeel:cluster_manager_leader " +
         std::to_string(leading ? 1 : 0) +
         "\n# TYPE keel:cluster_manager_fencing_token gauge\nkeel:cluster_manager_fencing_token " +
         std::to_string(fencing_token) +
         "\n# TYPE keel:cluster_manager_takeovers_total counter\n"
         "keel:cluster_manager_takeovers_total " +
         std::to_string(takeovers.load()) + "\n";
}

bool StopCheck::operator()() {
  timespec zero{0, 0};
  const int sig = sigtimedwait(signals, nullptr, &zero);
  if (sig > 0) seen = sig;
  return seen > 0;
}

int wait_for_stop(const sigset_t& stop_signals, proc::ProcessSupervisor& sup, ClusterScaler* scaler,
                  ClusterAutoscaler* autoscaler, TeReplacer* replacer, JeReplacer* je_replacer,
                  ClusterMembership& members, ManagerRole& role,
                  const std::function<Status()>& rejoined) {
  auto next_try = std::chrono::steady_clock::now();
  while (true) {
    if (!role.leading) {
      if (!members.alive()) {  // a standby's lost lease: a new session, its gateway again
        StopCheck stop{&stop_signals};
        const Status s = members.reopen(std::ref(stop));
        if (stop.seen > 0) return stop.seen;
        if (!s.ok()) return SIGTERM;
        if (Status r = rejoined(); !r.ok()) KEEL_LOG_WARN("cluster: {}", r.to_string());
      } else if (std::chrono::steady_clock::now() >= next_try) {
        next_try = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
        if (role.try_take_over(members)) continue;
      }
    } else if (!members.alive()) {
      KEEL_LOG_ERROR("cluster: membership lease lost: autoscaler stopped; campaigning again");
      role.leading = false;        // fenced: /metrics says so while it campaigns
      if (role.lost) role.lost();  // another manager may lead (and manage the TEs) now
      StopCheck stop{&stop_signals};
      const Status s = members.rejoin(std::ref(stop));
      if (stop.seen > 0) return stop.seen;
      if (!s.ok()) {
        KEEL_LOG_ERROR("cluster: cannot rejoin the membership: {}", s.to_string());
        return SIGTERM;
      }
      role.leading = true;
      if (Status r = rejoined(); !r.ok()) KEEL_LOG_WARN("cluster: {}", r.to_string());
      if (Status t = role.take_over ? role.take_over() : Status(); !t.ok()) {
        KEEL_LOG_ERROR("cluster: leading again, but the TEs: {}", t.to_string());
      }
      KEEL_LOG_INFO("cluster: leading again: autoscaler resumed");
    }
    timespec tick{0, 50 * 1000 * 1000};
    const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    if (sig > 0) return sig;
    if (!role.leading) {  // a standby manages nothing but its own JEs
      const std::vector<proc::ChildExit> exits = sup.poll_exits();
      for (const proc::ChildExit& e : exits) {
        KEEL_LOG_WARN("cluster: {} exited unexpectedly: {}", e.name, e.describe());
      }
      if (je_replacer != nullptr) je_replacer->tick(exits);
      continue;
    }
    if (autoscaler != nullptr) autoscaler->tick();
    if (scaler != nullptr) scaler->tick();
    if (role.tick) role.tick();
    const std::vector<proc::ChildExit> exits = sup.poll_exits();
    for (const proc::ChildExit& e : exits) {
      KEEL_LOG_WARN("cluster: {} exited unexpectedly: {}", e.name, e.describe());
    }
    // JEs first: a TE replacement joins every JE, the restarted one included.
    if (je_replacer != nullptr) je_replacer->tick(exits);
    if (replacer != nullptr) replacer->tick(exits);
  }
}

}  // namespace keel::control
