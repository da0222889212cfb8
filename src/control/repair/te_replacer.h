// TeReplacer: the cluster manager's side of health from progress. From the manager's loop it
// learns of task executors (TEs) that are out of service — a child that exited on its own, or a
// TE a job executor (JE) lists as hung or dead (te_health.h) — and for each, once
// (te_replacement.h): kills it by PID (SIGKILL at once: its jobs moved, it must not send anything
// more), brings a replacement up — an idle warm-pool TE bound to the model in the TE's role when
// there is one, else a cold start with the same command under a new id — and adds it to
// every JE (add_te). The JEs have already re-driven the dead TE's jobs; the old TE leaves their
// fleet lists (remove_te with forget). Exported as Prometheus text
// (keel:cluster_te_hung_total, keel:cluster_te_dead_total, keel:cluster_te_replaced_total,
// keel:cluster_te_replace_failed_total, keel:cluster_te_replacement_seconds: detection to the
// replacement added to the JEs) and JSON event-log lines (te_hung, te_dead, te_replaced,
// te_replace_failed).
//
// Thread safety: manage() and tick() on the supervisor's thread (spawn/stop are its);
// metrics_text() from any thread.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/policy/te_replacement.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "cluster/protocol/seconds_histogram.h"
#include "control/manager/caller.h"
#include "control/repair/executor_processes.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/result.h"
#include "proc/child_exit.h"

namespace keel::control {

struct TeReplacerConfig {
  std::vector<std::string> je_addresses;           // every JE a replacement joins
  std::chrono::milliseconds start_timeout{60000};  // a cold replacement's fork → ready line
  std::chrono::milliseconds poll_interval{200};    // how often the fleet is read
  std::string event_log;                           // JSON lines, appended; "" = none
  // The fleet as a JE sees it (required).
  std::function<Result<cluster::FleetSnapshot>()> fleet;
  // The warm pool (optional): its idle TEs, and one bound to the model and added to the JEs.
  std::function<int()> warm_idle;
  std::function<Result<cluster::ManagedTe>(cluster::TeRole)> warm_bind;  // in the TE's role
  std::shared_ptr<Caller> caller;  // remove_te and add_te to the JEs; none: a LinkCaller
  const Clock* clock = nullptr;    // detection and polls; none: the steady clock
  [[nodiscard]] Status validate() const;
};

class TeReplacer {
 public:
  // `processes` kills the TEs replaced and starts the cold replacements (SupervisedProcesses:
  // the manager's children).
  static Result<std::unique_ptr<TeReplacer>> create(std::shared_ptr<ExecutorProcesses> processes,
                                                    TeReplacerConfig config);
  TeReplacer(const TeReplacer&) = delete;
  TeReplacer& operator=(const TeReplacer&) = delete;

  // A TE the manager started; `next_id` numbers the replacements' names ("te-<n>").
  void manage(cluster::ManagedTe te);
  void set_next_id(int next_id) { next_id_ = next_id; }
  // One pass of the manager's loop: `exits` are the children poll_exits() reaped this pass; the
  // fleet is read every poll_interval. Replacements happen here (a cold start blocks the loop
  // until the new TE is ready).
  void tick(const std::vector<proc::ChildExit>& exits);
  // The control addresses of the TEs it manages that are not replaced (the JE replacer hands
  // them to a restarted JE). Supervisor's thread.
  [[nodiscard]] std::vector<std::string> live_addresses() const;
  [[nodiscard]] std::string metrics_text() const;

 private:
  TeReplacer(std::shared_ptr<ExecutorProcesses> processes, TeReplacerConfig config);
  void replace(const cluster::ReplaceAction& action, bool exited);
  Result<cluster::ManagedTe> cold_start(const cluster::ManagedTe& old);
  // Sends `m` to every JE in turn; the first failure is returned (the rest are still called).
  Status call_jes(const net::Message& m, std::chrono::milliseconds timeout);
  void log_event(const cluster::Json& event);

  std::shared_ptr<ExecutorProcesses> processes_;
  TeReplacerConfig config_;
  std::shared_ptr<Caller> caller_;
  SteadyClock steady_;
  const Clock* clock_;
  std::vector<cluster::ManagedTe> managed_;
  int next_id_ = 0;
  std::optional<int64_t> last_poll_ns_;
  std::optional<std::ofstream> log_;
  mutable Mutex mu_;  // the counters metrics_text() reads from any thread
  int64_t hung_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t dead_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t replaced_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t replace_failed_total_ KEEL_GUARDED_BY(mu_) = 0;
  cluster::SecondsHistogram replace_seconds_ KEEL_GUARDED_BY(mu_){0.1, 0.25, 0.5,  1.0,  2.0,
                                                                  3.0, 5.0,  10.0, 30.0, 60.0};
};

}  // namespace keel::control
