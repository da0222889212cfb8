// ClusterScaler: the scale-out side of `keel cluster up --warm-pool N --store-dir DIR` — the
// cluster manager's model store preload (before any TE starts, so all of them map it), its warm
// pool of model-agnostic TEs (control/scaleout/warm_pool.h), and the trigger that binds them: a
// `scale_out` call on its control port (`keel cluster scale [--role R]`; the autoscaler calls the
// same). A scale-out binds idle warm TEs to the cluster's model in a role (colocated, prefill or
// decode: the pool's TEs serve any), adds each to every JE (add_te), records its phases
// (/metrics histograms, the JSON-lines event log) and answers the caller; the pool is then
// refilled to N. Each TE's weights come from where cluster/weights/bind_source.h's plan says
// (--bind-source; auto: its host store, else a fork from a running TE that serves the entry, else
// the file). A scale-out asking for more TEs than the pool holds idle cold-starts the rest (new
// processes, started at the decision) instead of waiting for a refill.
//
// Store cleanup: the entry this cluster built is removed at shutdown(); an entry that was there
// before (another cluster's, or `keel cluster preload`'s) is left alone.
//
// Thread safety: start(), tick() and shutdown() on the supervisor's thread (the pool spawns
// children); the control link's reader only queues requests; metrics_text() from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cluster/protocol/fleet.h"
#include "cluster/weights/bind_source.h"
#include "control/scaleout/scale_out_metrics.h"
#include "control/scaleout/warm_pool.h"
#include "core/mutex.h"
#include "core/result.h"
#include "net/link_server.h"
#include "proc/process_supervisor.h"
#include "store/model_store.h"
#include "store/preload_plan.h"

namespace keel::control {

inline constexpr std::string_view kScaleOut = "scale_out";

struct ClusterScalerConfig {
  int warm_pool = 0;                      // warm TEs kept idle
  std::string store_dir;                  // "" = no store: bound TEs read the file
  uint64_t store_budget = 0;              // bytes (0 = no limit)
  std::string event_log;                  // JSON lines; "" = none
  std::vector<std::string> keel_command;  // what runs keel (cluster/protocol/executor_launch.h)
  cluster::TeSpec warm_te;                // the warm TEs' spec (the pool names each)
  std::vector<std::string> je_addresses;  // or set_je_addresses() later
  std::string model_path;
  std::string isa;  // the kernel table the TEs run (the store key's ISA)
  // The engine a bind to a role gives the warm TE (a prefill TE's has its KV hand-off); a role
  // not listed keeps the warm TE's own.
  std::map<cluster::TeRole, cluster::TeEngineSpec> role_engine;
  // Where a bound TE gets its weights (cluster/weights/bind_source.h): store, fork from a running
  // TE that serves the entry, or the file.
  cluster::BindSourceMode bind_source = cluster::BindSourceMode::kAuto;
  // Non-empty: each warm TE has its own store "<this>/<TE name>" (as if on a host of its own;
  // nothing is preloaded there): a bound TE forks the entry from a peer, or reads the file.
  std::string te_store_root;
  std::chrono::milliseconds start_timeout{120000};
  // The forecast (store/preload_plan.h), run once a second within store_budget (> 0): the fleet's
  // finished-request count (empty: no forecast), the EWMA's half-life, the rate worth a preload.
  // The managers sharing the store see each other's rates on its demand board
  // (store/demand_board.h) and plan over all of them; each carries out its own model's actions.
  // Under a budget the start-up preload evicts nothing (the forecast decides); an entry of this
  // manager's that another evicted is let go (its memfd closed).
  std::function<int64_t()> requests_total;
  double rate_half_life_s = 30.0;
  double min_rate = 0.05;
};

class ClusterScaler {
 public:
  static Result<std::unique_ptr<ClusterScaler>> start(proc::ProcessSupervisor* sup,
                                                      ClusterScalerConfig config);
  ~ClusterScaler();

  [[nodiscard]] uint16_t control_port() const { return server_->port(); }
  // The JEs a bound TE joins (known once they started, after the store and the pool).
  void set_je_addresses(std::vector<std::string> addresses) {
    config_.je_addresses = std::move(addresses);
  }
  // The forecast's request counter (known once the gateway's fleet client exists).
  void set_requests_total(std::function<int64_t()> fn) { config_.requests_total = std::move(fn); }
  // Serves the queued scale-out requests, refills the pool, and runs the preload forecast.
  void tick();
  [[nodiscard]] std::string metrics_text() const { return metrics_.text(); }
  // Binds `tes` warm TEs to `role` now and adds them to the JEs (the autoscaler's scale-out; on
  // the supervisor's thread). The reply: {"ok", "tes": [scale_out events], "errors"?}.
  cluster::Json scale_out(int tes, cluster::TeRole role = cluster::TeRole::kColocated);
  [[nodiscard]] int idle_warm() const { return static_cast<int>(pool_.idle()); }
  // A running TE whose store holds the model's entry and serves it at `weights_address` (a fork
  // source while its process `pid` lives). Bound TEs that mapped or forked the entry are added
  // by scale_out() itself.
  void add_peer(pid_t pid, std::string weights_address);
  // Stops the control port and removes the store entry this cluster built.
  void shutdown();

 private:
  struct Request {
    std::shared_ptr<net::Link> link;
    int64_t call_id = 0;
    int tes = 1;
    cluster::TeRole role = cluster::TeRole::kColocated;
  };
  ClusterScaler(proc::ProcessSupervisor* sup, ClusterScalerConfig config);
  void on_message(net::Link& link, net::Message m);
  void forecast();
  void release_if_evicted();
  void apply_forecast(const std::vector<store::PreloadAction>& actions, store::ModelStore& st,
                      const store::StoreKey& key);
  // A `{"event":"forecast","action",...}` event-log line: preload, skip (not at start-up: the
  // budget holds other entries), evict, released (evicted by another preload).
  void log_forecast(const std::string& action, double rate, const std::string& what,
                    const std::vector<std::string>& evicted);
  Status add_to_jes(const std::string& te_address);
  // One bind per TE about to be bound (the next `n` idle ones), with its plan's source.
  std::vector<cluster::BindModel> plan_binds(int n, cluster::TeRole role,
                                             std::vector<cluster::BindSourcePlan>* plans) const;
  [[nodiscard]] std::vector<std::string> live_peers() const;

  ClusterScalerConfig config_;
  control::WarmPool pool_;
  proc::ProcessSupervisor* sup_;             // not owned
  std::unique_ptr<net::LinkServer> server_;  // the scale-out control's links
  store::SealedHolder sealed_;  // the entries this manager built: sealed memfds, held here
  std::optional<store::PreloadResult> entry_;  // the model's store entry
  bool entry_owned_ = false;                   // built by this cluster
  std::optional<store::StoreKey> key_;         // the model's store key (hashed once, at start)
  std::string entry_name_;                     // its entry name ("" without a store)
  struct Peer {
    pid_t pid = 0;
    std::string weights_address;
  };
  std::vector<Peer> peers_;  // fork sources (see add_peer)
  control::ScaleOutMetrics metrics_;
  std::optional<std::ofstream> log_;
  // The forecast's state: the last count and when, the EWMA of the request rate.
  int64_t last_requests_ = -1;
  std::chrono::steady_clock::time_point last_forecast_{};
  double rate_ = 0.0;
  std::string posted_demand_;  // this model's note on the store's demand board ("" = none)
  Mutex mu_;
  std::deque<Request> requests_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::control
