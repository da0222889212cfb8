// GangWatch: `keel cluster up --nodes auto` keeping its placed gangs whole (cluster_nodes.h) — the
// gangs whose processes serve only together: an expert-parallel TE with its members, a pipelined
// TE with its stage 1 (serves_together, instance_gangs.h; a lone TE or a prefill + decode pair,
// whose TEs serve on their own, is left to its lease as before). Every `period` while the manager
// leads, it lists the node agents and checks each such gang with the pure step function
// cluster/policy/gang_health.h: a process its agent no longer runs (it
// exited: an expert member killed, a TE that exited because its member or stage was lost), or
// whose host is gone, loses the gang. The gang is then replaced whole: its other processes are
// stopped through their agents at once (SIGKILL: a TE that lost a member cannot serve; its JEs
// re-drive its jobs when its link closes) and forgotten by the JEs, and the same gang is placed
// and started again under new ids (`<id>-r<generation>`, the instance name kept) — for an
// expert-parallel TE, new members first, then a TE given their addresses. Each loss is an
// event-log line {"event":"gang_lost","instance","lost":[ids],"processes":[ids]}, then
// {"event":"gang_replaced","instance","processes":[ids],"seconds"} or
// {"event":"gang_replace_failed","instance","reason"} (the gang is then left down, reported), and
// /metrics counts keel:gang_lost_total, keel:gang_replaced_total, keel:gang_replace_failed_total.
// A gang this manager stops on purpose (stop_te, a drain, its own eviction) is no longer placed
// and not watched. A process another manager stopped (its agent lists it as stopped on command:
// a higher-priority gang evicted this one) is no loss to repair: the rest of the gang is stopped
// and it is not replaced ({"event":"gang_stopped","instance","stopped":[ids]},
// keel:gang_stopped_total).
//
// Thread safety: tick() from the manager's loop thread (the owner of ClusterNodes);
// metrics_text() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <vector>

#include "cluster/policy/gang_health.h"
#include "control/placement/cluster_nodes.h"
#include "core/clock.h"
#include "membership/membership.h"

namespace keel::control {

struct GangWatchConfig {
  std::string model;                      // the served model name (metrics labels)
  std::chrono::milliseconds period{500};  // between checks
  int32_t max_unseen_checks = 20;         // a fresh process not yet listed (gang_health.h)
  const Clock* clock = nullptr;           // none: the steady clock
  // Read the agents' process lists on a thread of their own and check them at a later tick, so a
  // store cut off never holds up the manager loop (its lease checks and step-down run there).
  // Off: tick() reads and checks at once (unit tests).
  bool background = true;
};

class GangWatch {
 public:
  GangWatch(ClusterNodes* nodes, GangWatchConfig config);

  // Checks the placed gangs when `period` has passed since the last check; replaces a gang that
  // lost a process. A failed listing skips the check (logged).
  void tick(membership::Membership& session);
  // Waits for a listing in flight and drops it. Call before the session it reads is replaced or
  // closed (the destructor does too).
  void settle();
  ~GangWatch();

  [[nodiscard]] std::string metrics_text() const;

 private:
  // The processes of `gang` as watched (its state kept when the ids are the ones watched).
  std::vector<cluster::WatchedProcess>& watched(const std::string& instance,
                                                const PlacedGang& gang);
  void replace(membership::Membership& session, const std::string& instance,
               const std::vector<std::string>& lost);
  void stopped(membership::Membership& session, const std::string& instance,
               const std::vector<std::string>& ids);
  // The check of one listing of the agents (tick's second half).
  void check(membership::Membership& session,
             const Result<std::vector<cluster::NodeCapacity>>& nodes);

  ClusterNodes* nodes_;
  GangWatchConfig config_;
  SteadyClock steady_;
  const Clock* clock_;
  int64_t next_check_ns_ = 0;
  std::future<Result<std::vector<cluster::NodeCapacity>>> listing_;    // in flight (background)
  std::map<std::string, std::vector<cluster::WatchedProcess>> state_;  // by instance
  std::map<std::string, GangStart> first_;  // each instance's gang as first placed (its ids)
  std::map<std::string, int32_t> generation_;
  std::atomic<int64_t> lost_{0};
  std::atomic<int64_t> replaced_{0};
  std::atomic<int64_t> replace_failed_{0};
  std::atomic<int64_t> stopped_{0};
};

}  // namespace keel::control
