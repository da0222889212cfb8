// JeReplacer: the cluster manager's supervision of its job executors (JEs), as TeReplacer is of
// its TEs. A JE child that exits on its own (a crash, kill -9) is started again under its name
// with its own command at its own address — so the gateway, which reconnects there, and the
// TE replacer, scaler and autoscaler, which call the JEs there, need no news — routing to the
// TEs as the fleet was last seen (another JE's view when one answers, else the snapshot this
// replacer reads every poll_interval) and to the TEs the manager knows it runs (a replacement
// started since the snapshot). The replacement gets a short TE connect timeout, so a TE that
// died meanwhile is left out (and replaced and added as usual) rather than waited for. A
// start that fails (the port taken meanwhile) is tried again every retry_interval. The gateway
// re-submits the dead JE's jobs (fleet_client.h). Exported as Prometheus text
// (keel:cluster_je_dead_total, keel:cluster_je_replaced_total,
// keel:cluster_je_replace_failed_total, keel:cluster_je_replacement_seconds: exit seen to the
// replacement's ready line) and JSON event-log lines (je_dead, je_replaced, je_replace_failed).
// A JE that hangs (alive, not answering) is not detected here.
//
// Thread safety: manage() and tick() on the supervisor's thread; metrics_text() from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/policy/je_replacement.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "cluster/protocol/seconds_histogram.h"
#include "control/repair/executor_processes.h"
#include "core/clock.h"
#include "core/mutex.h"
#include "core/result.h"
#include "proc/child_exit.h"

namespace keel::control {

struct JeReplacerConfig {
  std::chrono::milliseconds start_timeout{60000};      // a replacement's fork → ready line
  std::chrono::milliseconds poll_interval{500};        // how often the fleet snapshot is refreshed
  std::chrono::milliseconds retry_interval{1000};      // after a failed start
  std::chrono::milliseconds te_connect_timeout{1000};  // the replacement's, per TE
  std::string event_log;                               // JSON lines, appended; "" = none
  // The fleet as the JEs see it now (required; fails while none answers).
  std::function<Result<cluster::FleetSnapshot>()> fleet;
  // The TEs the manager itself runs now (optional; control addresses): added to the snapshot's,
  // so a TE started after the last snapshot (a replacement) is not left out.
  std::function<std::vector<std::string>()> known_tes;
  const Clock* clock = nullptr;  // detection, polls and retries; none: the steady clock
  [[nodiscard]] Status validate() const;
};

class JeReplacer {
 public:
  // `processes` starts the replacements (SupervisedProcesses: the manager's children).
  static Result<std::unique_ptr<JeReplacer>> create(std::shared_ptr<ExecutorProcesses> processes,
                                                    JeReplacerConfig config);
  JeReplacer(const JeReplacer&) = delete;
  JeReplacer& operator=(const JeReplacer&) = delete;

  void manage(cluster::ManagedJe je);
  // One pass of the manager's loop: `exits` are the children reaped this pass. Restarts happen
  // here (blocking the loop until the new JE is ready or its start fails).
  void tick(const std::vector<proc::ChildExit>& exits);
  [[nodiscard]] std::string metrics_text() const;

 private:
  struct Down {
    size_t je_idx = 0;
    int64_t detected_ns = 0;
    int64_t next_try_ns = 0;
  };
  JeReplacer(std::shared_ptr<ExecutorProcesses> processes, JeReplacerConfig config);
  void restart(Down& down);
  void log_event(const cluster::Json& event);

  std::shared_ptr<ExecutorProcesses> processes_;
  JeReplacerConfig config_;
  SteadyClock steady_;
  const Clock* clock_;
  std::vector<cluster::ManagedJe> managed_;
  std::vector<Down> down_;
  std::optional<cluster::FleetSnapshot> last_fleet_;  // the last snapshot a JE gave
  std::optional<int64_t> last_poll_ns_;
  std::optional<std::ofstream> log_;
  mutable Mutex mu_;  // the counters metrics_text() reads from any thread
  int64_t dead_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t replaced_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t replace_failed_total_ KEEL_GUARDED_BY(mu_) = 0;
  cluster::SecondsHistogram replace_seconds_ KEEL_GUARDED_BY(mu_){0.1, 0.25, 0.5,  1.0,
                                                                  2.0, 5.0,  10.0, 30.0};
};

}  // namespace keel::control
