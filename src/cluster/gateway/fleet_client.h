// FleetClient: the gateway's EngineClient — the server's generation code runs unchanged in front
// of a fleet. submit() hands the request (tokenized by the server, once, before routing) to a
// job executor (round robin over the JEs; the next one when a JE is unreachable) and returns when
// a TE accepted it; the TE then streams the request's token events straight to this client's
// event listener (FlowServe's shortcut: the JE stays on the control path only). Detokenization
// stays in the server, on this side.
//
// Re-drives: a JE that moves a job to another TE says so (job_attempt); events of an older
// attempt are dropped from then on, and tokens the client already has (an event's generated-token
// index below what was delivered) are cut, so the client sees one unbroken stream. A job the JE
// gives up on (job_failed) ends with a kError event.
//
// The activator (scale to zero): a request no JE can place because no TE is ready is held in a
// FIFO queue; one activator thread retries the oldest every 20 ms (while it is refused for want
// of a TE so would the others be), places the rest in order once it goes through, and gives up
// on each at its activation timeout. submit_async() never waits on another process: the JE is
// asked with an asynchronous call (Link::call_async; the next JE on a timeout), a held request
// waits on the activator thread, and one that finds every JE down waits for a restart on the
// gateway's slow-submit thread — so a slow or stuck JE holds none of the HTTP server's io threads
// and starts no thread. submit() waits on the caller's thread.
//
// JE failover (fleet_client_failover.cpp): a watch thread reconnects a JE whose link closed (it
// died; the cluster manager restarts it at its address) and submits its jobs again — the next
// attempt, resumed from the tokens the client has, with the request's seed (filled in here when
// it had none, so the rest is what the first attempt would have produced) — to a JE that is up,
// or to the restarted one once it is; the new JE aborts the old attempt on the TEs, which stream
// on until then. A submission that finds no JE up waits for one, up to je_wait.
//
// Programs (docs/agents.md): a request with a program id goes first to the JE a hash of its
// (tenant, program) picks, so one JE sees every call of a program (its sticky routing and program
// scheduling); the next JE when that one is down, as for any request.
//
// KV kept across tool calls (docs/agent-kv.md): a request with keep_kv crosses to its TE, whose
// engine pins it as keel serve's does; a finished one's JE is remembered (at most kMaxKept, the
// oldest forgotten first) so release_kv_pin can send release_kv_job to it — a one-way send, which
// the JE passes on to the TE holding the pin. A JE or TE that died took the pin with it.
//
// Stats and metrics are the fleet's: the sum over the TEs (histograms bucket by bucket), as the
// JEs see them; fleet_status() asks every JE at once and merges their answers (fleet_merge.h: the
// JEs' counters summed, each listed). stats(), metrics() and fleet_status_snapshot() never wait:
// they answer from the last merged status and, when it is older than status_cache, ask for a new
// one in the background (fleet_client_status.cpp). Context caches (retain_as) are not
// offered through the gateway: submit refuses them with InvalidArgument. LoRA adapters are the
// ones named at start (FleetClientConfig::loras), served by every TE; none is loaded at run time.
//
// Thread safety: EngineClient's contract (every method from any thread); sinks are called under
// the client's mutex, in order per request.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cluster/protocol/hop_timings.h"
#include "cluster/protocol/messages.h"
#include "core/mutex.h"
#include "core/task_queue.h"
#include "core/thread_annotations.h"
#include "engine/engine_client.h"
#include "net/link.h"
#include "net/link_server.h"

namespace keel::cluster {

struct FleetClientConfig {
  std::string gateway_id;                 // "" = a random one
  std::vector<std::string> je_addresses;  // "host:port"
  std::string event_host = "127.0.0.1";   // where TEs connect to stream events
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds call_timeout{10000};
  std::chrono::milliseconds status_cache{250};
  // The LoRA adapters every TE serves (named at start: `keel cluster up --lora`), as
  // list_loras() reports them; a request names one by GenerationRequest::lora.
  std::vector<engine::LoraInfo> loras;
  // Scale to zero (Knative's activator): a request no JE can place because no TE is ready
  // (Unavailable) is held here and retried every 20 ms until one is, for at most
  // activation_timeout; then submit() returns Unavailable (the server's 503 with Retry-After).
  // 0: no hold.
  std::chrono::milliseconds activation_timeout{0};
  // false: start() does not wait for a TE (a fleet that starts with none) and takes its limits
  // from here (the TEs of one cluster share their flags, so these are theirs).
  bool wait_for_te = true;
  int64_t max_model_len = 0;
  int64_t max_waiting = 0;
  // JE failover: a submission that finds no JE up waits this long for one (a restart), holding
  // the caller's thread; a job whose JE died is failed when no JE took it again and its TE sent
  // nothing for this long.
  std::chrono::milliseconds je_wait{10000};
  std::chrono::milliseconds je_watch_interval{50};  // how often lost JEs are looked for
  // A request whose placement (submit → a TE took it) takes this long is logged at info with
  // every hop (hop_timings.h); faster ones at debug.
  std::chrono::milliseconds slow_placement_log{1000};
};

class FleetClient final : public engine::EngineClient {
 public:
  // Connects to every JE and waits (up to connect_timeout) until one reports a healthy TE.
  static Result<std::unique_ptr<FleetClient>> start(FleetClientConfig config);
  ~FleetClient() override;

  // Returns once a TE accepted the request; while none is ready, holds it up to
  // activation_timeout (the calling thread waits).
  Result<engine::RequestKey> submit(engine::GenerationRequest request,
                                    std::shared_ptr<engine::OutputSink> sink) override;
  // The same without waiting out a hold: `done` runs inline unless the request is held, then on
  // the activator thread once it is placed, refused, or past activation_timeout.
  void submit_async(engine::GenerationRequest request, std::shared_ptr<engine::OutputSink> sink,
                    SubmitDone done) override;
  void abort(engine::RequestKey key) override;
  // Never waits: a queued send to the JE that ran the request (see the file comment).
  void release_kv_pin(engine::RequestKey key) override;
  bool release_cache(const std::string& id, const std::string& salt) override;
  [[nodiscard]] std::optional<engine::ContextCacheInfo> find_cache(
      const std::string& id, const std::string& salt) const override;
  [[nodiscard]] std::vector<engine::ContextCacheInfo> list_caches(
      const std::string& salt) const override;
  [[nodiscard]] engine::EngineStats stats() const override;
  [[nodiscard]] engine::MetricsSnapshot metrics() const override;
  void drain(std::chrono::milliseconds timeout) override;
  [[nodiscard]] int64_t max_model_len() const override { return max_model_len_; }
  [[nodiscard]] int64_t max_waiting() const override { return max_waiting_; }
  // Adapters are fixed at start in a fleet: loading or unloading one at run time is refused
  // (Unsupported, naming `keel cluster up --lora`).
  Status load_lora(const std::string& name, const std::string& path) override;
  Status unload_lora(const std::string& name) override;
  [[nodiscard]] std::vector<engine::LoraInfo> list_loras() const override { return config_.loras; }

  // The fleet over every JE (merge_fleet_statuses): the TEs as the first JE that answers sees
  // them, every JE's counters summed, job_executors one entry per JE, up or down. Unavailable,
  // naming each JE and why, when none answers.
  [[nodiscard]] Result<FleetStatus> fleet_status() const;
  // The same without waiting (for io threads: /health): the last merged status — at most
  // status_cache old plus one round trip, a refresh asked for when older — or Unavailable until
  // the first one came.
  [[nodiscard]] Result<FleetStatus> fleet_status_snapshot() const;
  // Jobs submitted again after their JE died.
  [[nodiscard]] int64_t num_resubmitted() const { return resubmitted_.load(); }
  // Requests in flight through this gateway (held ones included).
  [[nodiscard]] size_t num_jobs() const;
  // Per-hop placement histograms (hop_timings.h) as Prometheus text, for the gateway's /metrics.
  [[nodiscard]] std::string hop_metrics_text() const { return hops_.metrics_text(); }
  // Requests held now for want of a ready TE (the autoscaler's activation signal).
  [[nodiscard]] int64_t num_held() const { return held_.load(); }
  // How long a request is held at most (0: not held).
  [[nodiscard]] std::chrono::milliseconds activation_timeout() const {
    return config_.activation_timeout;
  }
  // Closes every link and the event listener. Idempotent.
  void stop();

 private:
  struct Pending {
    std::shared_ptr<engine::OutputSink> sink;
    std::shared_ptr<net::Link>
        je;  // the JE holding it (nullptr: not yet, or being submitted again)
    int32_t attempt = 0;
    int32_t delivered = 0;  // generated tokens the client has (index space of TaskEvent)
    // For a submission again after its JE died: the request as submitted (its seed filled in),
    // the generated tokens the client has, in order, and when its last event came.
    engine::GenerationRequest request;
    std::vector<int32_t> tokens;
    std::chrono::steady_clock::time_point last_event;
    bool placed = false;  // a JE took it (before: its submission, or the activator, owns it)
  };

  // A request waiting for a ready TE (the activator's queue).
  struct Held {
    engine::RequestKey key = 0;
    std::shared_ptr<const net::Message> message;  // its SubmitJob
    std::chrono::steady_clock::time_point deadline;
    Status last;  // its latest refusal
    SubmitDone done;
  };

  explicit FleetClient(FleetClientConfig config);
  // Ends a submission: forgets the job when `status` is an error, then runs `done`.
  void resolve(engine::RequestKey key, const Status& status, const SubmitDone& done);
  // The activator thread: retries the oldest held request every 20 ms (see the file comment).
  void run_activator();
  // Resolves and drops held requests past their deadline (all of them while draining or
  // stopped); activator thread.
  void expire_held();
  void on_event_message(net::Message message);
  void on_je_message(net::Message message);
  void deliver(TaskEvent event);
  // One pass over the JEs (round robin from the next one): the first JE's answer. The
  // asynchronous one runs `done` once, on a JE link's thread (or inline when no JE is up to ask);
  // every JE down: it waits (up to je_wait) on the slow-submit thread. submit_once waits.
  struct SubmitTry;
  void submit_once_async(engine::RequestKey key, std::shared_ptr<const net::Message> message,
                         std::function<void(Status)> done);
  // The pass itself, over the JEs up now (none: `done` runs inline with Unavailable).
  void submit_now(engine::RequestKey key, std::shared_ptr<const net::Message> message,
                  std::function<void(Status)> done);
  void submit_step(std::shared_ptr<SubmitTry> t);
  Status submit_once(engine::RequestKey key, const std::shared_ptr<const net::Message>& message);
  // Records a placed request's hops (the JE's reply) and logs them when it was slow.
  void note_hops(const SubmitTry& t, const Json& reply);
  // Puts a request no TE could take on the activator's queue.
  void hold(engine::RequestKey key, std::shared_ptr<const net::Message> message, Status last,
            SubmitDone done);
  // Asks every JE for its status at once; `done` runs once with the merged answer.
  void fleet_status_async(std::function<void(Result<FleetStatus>)> done) const;
  // Counts an asynchronous call out (stop() waits until every one has ended).
  void call_started() const;
  void call_ended() const;
  // Ends `key` with `event` (a final one) and forgets it; false when unknown.
  bool finish_locally(engine::RequestKey key, engine::TokenEvent event);
  // JE failover (fleet_client_failover.cpp). The JE links now (a reconnect replaces one), and
  // whether one is up.
  [[nodiscard]] std::vector<std::shared_ptr<net::Link>> je_links() const;
  [[nodiscard]] bool any_je_up() const;
  // Waits up to je_wait while no JE is up; false when none came.
  bool await_je() const;
  bool await_je_until(std::chrono::steady_clock::time_point deadline) const;
  // The watch thread: reconnects lost JEs, then submits their jobs again.
  void watch_loop();
  void reconnect_lost_jes();
  void resubmit_orphans();
  // Submits job `key` again, resumed, to the JE `je`: Ok, Unavailable (it stays an orphan), or
  // another error (it ends with it).
  Status resubmit(engine::RequestKey key, const std::shared_ptr<net::Link>& je);

  FleetClientConfig config_;
  std::unique_ptr<net::LinkServer> events_;  // the TEs' event links
  mutable Mutex je_mu_;
  std::vector<std::shared_ptr<net::Link>> jes_ KEEL_GUARDED_BY(je_mu_);  // one per je_addresses
  mutable std::vector<std::string> je_ids_ KEEL_GUARDED_BY(je_mu_);      // the id each last gave
  int64_t max_model_len_ = 0;
  int64_t max_waiting_ = 0;

  mutable Mutex mu_;
  std::map<engine::RequestKey, Pending> jobs_ KEEL_GUARDED_BY(mu_);
  bool draining_ KEEL_GUARDED_BY(mu_) = false;
  bool stopped_ KEEL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> next_key_{1};
  std::atomic<size_t> next_je_{0};
  std::atomic<int64_t> held_{0};

  Mutex held_mu_;
  std::condition_variable held_cv_;
  std::deque<Held> held_queue_ KEEL_GUARDED_BY(held_mu_);  // oldest first
  bool activator_stop_ KEEL_GUARDED_BY(held_mu_) = false;
  std::thread activator_;  // runs while activation_timeout > 0

  std::atomic<int64_t> resubmitted_{0};
  // Finished requests that kept their KV: the JE each last ran on (lock order: mu_, then kept_mu_;
  // release_kv_pin may run inside a sink's on_event, under mu_).
  static constexpr size_t kMaxKept = 65536;
  Mutex kept_mu_;
  std::map<engine::RequestKey, std::weak_ptr<net::Link>> kept_ KEEL_GUARDED_BY(kept_mu_);
  std::deque<engine::RequestKey> kept_order_ KEEL_GUARDED_BY(kept_mu_);
  Mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ KEEL_GUARDED_BY(watch_mu_) = false;
  std::thread watcher_;  // JE failover

  mutable Mutex status_mu_;
  // The last merged status (or why none).
  mutable std::optional<Result<FleetStatus>> cached_ KEEL_GUARDED_BY(status_mu_);
  mutable std::chrono::steady_clock::time_point cached_at_ KEEL_GUARDED_BY(status_mu_);
  mutable bool refreshing_ KEEL_GUARDED_BY(status_mu_) = false;  // a background refresh is out

  mutable Mutex calls_mu_;
  mutable std::condition_variable calls_cv_;
  // Asynchronous calls whose continuation has not run.
  mutable int64_t calls_in_flight_ KEEL_GUARDED_BY(calls_mu_) = 0;
  std::unique_ptr<TaskQueue> slow_;  // submissions that wait for a JE to come back
  HopTimings hops_;
};

}  // namespace keel::cluster
