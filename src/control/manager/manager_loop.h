// The cluster manager's loop after `keel cluster up` has started: its place in the
// "cluster-manager" election (ManagerRole: leader or standby, shown in /metrics) and
// wait_for_stop, which runs the manager's periodic work until a stop signal — the autoscaler,
// scale-outs and replacements while it leads; while a --nodes auto standby, one try to lead every
// 200 ms, and on winning the takeover (the TEs adopted or started, cluster_nodes.h).
//
// Thread safety: ManagerRole's atomics are read by /metrics from any thread; everything else runs
// on cluster_up's thread.
#pragma once

#include <signal.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "control/autoscale/cluster_autoscaler.h"
#include "control/manager/cluster_membership.h"
#include "control/repair/je_replacer.h"
#include "control/repair/te_replacer.h"
#include "control/scaleout/cluster_scaler.h"
#include "core/result.h"
#include "proc/process_supervisor.h"

namespace keel::control {

struct ManagerRole {
  std::atomic<bool> leading{false};
  std::atomic<int64_t> takeovers{0};  // standby → leader transitions, counted once take_over ran
  std::function<Status()> take_over;  // run on winning, and on leading again (optional)
  std::function<void()> lost;         // run when the lease is lost while leading (optional)
  std::function<void()> tick;         // run every pass while leading (optional: --nodes auto's
                                      // gang watch, control/placement/gang_watch.h)

  // One try to lead; true when this process has just taken over.
  bool try_take_over(ClusterMembership& members);
  // keel:cluster_manager_leader (gauge), keel:cluster_manager_fencing_token (gauge: the token of
  // this process's latest leadership, 0 before any) and keel:cluster_manager_takeovers_total.
  std::string metrics_text(int64_t fencing_token) const;
};

// A stop signal taken while campaigning (0 when none came).
struct StopCheck {
  const sigset_t* signals;
  int seen = 0;
  bool operator()();
};

// Waits for a stop signal and returns it; meanwhile reports children that exit on their own and,
// while leading, runs the autoscaler (when there is one), serves scale-outs (when there is a warm
// pool) and replaces hung or dead TEs (unless --no-replace). A manager whose lease is lost (etcd
// said so, or no keepalive was confirmed for TTL − TTL/6: fenced before etcd can expire it) may
// have been replaced: it stops managing — no autoscaling, scale-outs or replacements, and
// keel:cluster_manager_leader 0 — and campaigns again (the gateway keeps serving); once it leads
// again it re-registers its gateway (`rejoined`), takes over again (`take_over`: with --nodes
// auto the TEs are adopted anew, having been dropped by `lost`) and resumes. A standby
// (role.leading false) manages nothing; it tries to lead every 200 ms (a lost lease: a new session,
// `rejoined`).
// JEs that exit are restarted in place by `je_replacer` (when there is one), leading or not: they
// are this process's own.
int wait_for_stop(const sigset_t& stop_signals, proc::ProcessSupervisor& sup, ClusterScaler* scaler,
                  ClusterAutoscaler* autoscaler, TeReplacer* replacer, JeReplacer* je_replacer,
                  ClusterMembership& members, ManagerRole& role,
                  const std::function<Status()>& rejoined);

}  // namespace keel::control
