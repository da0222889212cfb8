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
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cluster/fleet.h"
#include "cluster/je_spec.h"
#include "cluster/link.h"
#include "cluster/seconds_histogram.h"
#include "core/result.h"
#include "proc/child_exit.h"
#include "proc/process_supervisor.h"

namespace keel::cluster {

// A JE the manager started (and restarts).
struct ManagedJe {
  std::string name;     // its supervisor child name (its spec's id)
  std::string address;  // "127.0.0.1:port": a replacement listens there too
  pid_t pid = 0;        // its process (0 while down)
  // How it was started (executor_launch.h): a restart reuses both (je_replacement_spec).
  std::vector<std::string> keel_command;
  JeSpec spec;
};

struct JeReplacerConfig {
  std::chrono::milliseconds start_timeout{60000};      // a replacement's fork → ready line
  std::chrono::milliseconds poll_interval{500};        // how often the fleet snapshot is refreshed
  std::chrono::milliseconds retry_interval{1000};      // after a failed start
  std::chrono::milliseconds te_connect_timeout{1000};  // the replacement's, per TE
  std::string event_log;                               // JSON lines, appended; "" = none
  // The fleet as the JEs see it now (required; fails while none answers).
  std::function<Result<FleetSnapshot>()> fleet;
  // The TEs the manager itself runs now (optional; control addresses): added to the snapshot's,
  // so a TE started after the last snapshot (a replacement) is not left out.
  std::function<std::vector<std::string>()> known_tes;
  [[nodiscard]] Status validate() const;
};

// A restart's spec: `spec` listening on `port`, routing to `te_addresses` (none: the TEs are
// added later) with `connect_timeout` per TE. Pure.
[[nodiscard]] JeSpec je_replacement_spec(JeSpec spec, uint16_t port,
                                         const std::vector<std::string>& te_addresses,
                                         std::chrono::milliseconds connect_timeout);

// The TEs a replacement JE should route to, by control address: those `fleet` lists as serving
// (healthy or busy), then those in `known` it does not list at all (started since). Pure.
[[nodiscard]] std::vector<std::string> replacement_te_addresses(
    const FleetSnapshot& fleet, const std::vector<std::string>& known);

class JeReplacer {
 public:
  static Result<std::unique_ptr<JeReplacer>> create(proc::ProcessSupervisor* sup,
                                                    JeReplacerConfig config);
  JeReplacer(const JeReplacer&) = delete;
  JeReplacer& operator=(const JeReplacer&) = delete;

  void manage(ManagedJe je);
  // One pass of the manager's loop: `exits` are the children reaped this pass. Restarts happen
  // here (blocking the loop until the new JE is ready or its start fails).
  void tick(const std::vector<proc::ChildExit>& exits);
  [[nodiscard]] std::string metrics_text() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Down {
    size_t je_idx = 0;
    Clock::time_point detected;
    Clock::time_point next_try;
  };
  JeReplacer(proc::ProcessSupervisor* sup, JeReplacerConfig config);
  void restart(Down& down);
  void log_event(const Json& event);

  proc::ProcessSupervisor* sup_;  // not owned
  JeReplacerConfig config_;
  std::vector<ManagedJe> managed_;
  std::vector<Down> down_;
  std::optional<FleetSnapshot> last_fleet_;  // the last snapshot a JE gave
  Clock::time_point last_poll_{};
  std::optional<std::ofstream> log_;
  mutable std::mutex mu_;
  int64_t dead_total_ = 0;                                                       // GUARDED_BY(mu_)
  int64_t replaced_total_ = 0;                                                   // GUARDED_BY(mu_)
  int64_t replace_failed_total_ = 0;                                             // GUARDED_BY(mu_)
  SecondsHistogram replace_seconds_{0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0};  // GUARDED_BY(mu_)
};

}  // namespace keel::cluster
