// JobExecutor: DeepServe's job executor. Gateways submit jobs (a request, already tokenized); the
// JE routes each to a task executor (TE) and sends it as a task; the TE streams tokens straight
// to the gateway, while the JE stays on the control path: every TE reports its load and each
// task's new tokens, so the JE knows how far each job got and re-drives it — prompt plus the
// tokens already generated, as a new attempt with GenerationRequest::resumed_tokens — on another
// TE when its TE is dead (link gone) or hung (no engine step and no token for stall_timeout
// while it holds work, or no report at all for stall_timeout): health::classify (te_health.h).
// A dead or hung TE stays out (the cluster manager kills and replaces it; TeInfo::state says
// which). A request without a seed gets one here, so a
// re-driven sampled request continues exactly as the first attempt would have (the sampler's
// stream is counter-based).
//
// Invariants: a job is in the table from before its task is sent until its TE reports it
// finished (or it is failed); each job has exactly one live attempt, on one TE.
//
// Thread safety: start() and stop() from the owner's thread; handlers run on the links' reader
// threads and never wait on another process: a submitted job is handed to its TE with an
// asynchronous call (Link::call_async), and the gateway's reply goes out from its continuation.
// Re-drives run on the monitor thread (a re-drive that finds no TE is parked there and retried,
// never waited for on a link's reader thread); shared state under one mutex, never held across a
// call to another process. The cluster manager's add_te (a connect to the new TE) runs on a
// control thread. stop() waits for the calls in flight to end (their links closed).
//
// KV kept across tool calls (docs/agent-kv.md): a job that keeps its KV (GenerationRequest::
// keep_kv) is noted with its TE in sticky_pins.h when it is sent and again when it finishes; its
// program's next call goes to that TE first (RouteInput::sticky_te_id), and a release_kv_job from
// the gateway is sent on to that TE as release_kv_task (a one-way send on the gateway link's
// reader thread).
//
// Fault hook (tests): JobExecutorConfig::submit_delay holds every submitted job that long before
// it is handled (on one timer thread, not the link's reader) — a slow JE, for the gateway's
// asynchronous submit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cluster/job/admission.h"
#include "cluster/job/pd_heatmap.h"
#include "cluster/job/peer_hint.h"
#include "cluster/job/prefix_index.h"
#include "cluster/job/router.h"
#include "cluster/job/sticky_pins.h"
#include "cluster/kv_events/kv_event_subscriber.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/task_queue.h"
#include "net/link.h"
#include "net/link_server.h"

namespace keel::cluster {

struct JobExecutorConfig {
  std::string id = "je-0";
  std::string host = "127.0.0.1";
  uint16_t port = 0;                      // 0 = a free port
  std::vector<std::string> te_addresses;  // "host:port" of each TE's control endpoint
  std::chrono::milliseconds connect_timeout{30000};
  std::chrono::milliseconds stall_timeout{5000};
  std::chrono::milliseconds task_call_timeout{5000};
  int32_t max_attempts = 4;  // a job failed on this many TEs is failed
  // A re-drive that finds no TE able to take the job (the only one died; its replacement is
  // starting) waits up to this long for one, retried from the monitor loop, before the job fails.
  std::chrono::milliseconds redrive_wait{10000};
  // Routing: the served model, its prefix-cache identity and block size (the TEs' own, so the
  // prompt's block hashes equal the ones their cache events carry), the router's policy.
  std::string model;
  kv::BlockHash model_key;
  // The prefix key of each LoRA adapter the TEs serve, by name (engine::lora_prefix_key of
  // model_key and the adapter's content digest): an adapter request's blocks are hashed under it,
  // as its TE's cache events are. A name not here is routed by load alone (no prefix match).
  std::map<std::string, kv::BlockHash> lora_keys;
  int32_t block_size = 16;
  RouterConfig router;
  std::optional<PdHeatmap> heatmap;
  // The decode-length predictor (src/predictor, composed by `keel je`): the bucket a prompt's
  // generation will end in and its token count, for the router's PD heatmap. Unset: the request's
  // max_tokens stands in. bucket_of maps an actual generated length to its bucket (for the
  // predicted-vs-actual counts).
  struct DecodePrediction {
    int32_t bucket = 0;
    int64_t tokens = 0;
  };
  std::function<Result<DecodePrediction>(std::span<const int32_t> prompt)> predict;
  std::function<int32_t(int64_t generated)> bucket_of;
  // Fault hook (tests): every submitted job waits this long before it is handled. 0: none.
  std::chrono::milliseconds submit_delay{0};
  // Admission (admission.h): with max_jobs_per_te > 0 the JE lets at most that many jobs per
  // serving TE run at once and holds the rest — answering the gateway at once — letting them in
  // by class, priority and tenant share as jobs end; a job held longer than admission_wait fails.
  // 0: every job is dispatched as it comes (the TEs' engines queue it).
  int32_t max_jobs_per_te = 0;
  std::chrono::milliseconds admission_wait{60000};
  AdmissionConfig admission;
  // KV kept across tool calls (sticky_pins.h): how long the TE of a call that keeps its KV is
  // remembered for its program's next call and its release — the TEs' --kv-pin-ttl. 0: never.
  std::chrono::milliseconds kv_pin_ttl{60000};
};

class JobExecutor {
 public:
  static Result<std::unique_ptr<JobExecutor>> start(JobExecutorConfig config);
  ~JobExecutor();
  JobExecutor(const JobExecutor&) = delete;
  JobExecutor& operator=(const JobExecutor&) = delete;

  [[nodiscard]] uint16_t port() const { return server_->port(); }
  [[nodiscard]] std::string address() const { return server_->address(); }
  [[nodiscard]] FleetStatus status() const;
  // Adds the TE at `address` (host:port) to the fleet: connects to it; the router takes it once it
  // has reported. The warm pool's scale-out (add_te from the cluster manager).
  Status add_te(const std::string& address);
  // Drains the TE at `address` (remove_te from the cluster manager): the router no longer picks
  // it; its jobs go on, and are re-driven as for a dead TE if it goes away with work left.
  // NotFound when the JE does not know it.
  // With forget (the TE was stopped or replaced) it also leaves the fleet list: counted dead (its
  // jobs are re-driven), its link closed, no longer in status().
  Status remove_te(const std::string& address, bool forget = false);
  // The TE at `address` is gone (its membership lease expired, or it deregistered): removed as
  // with forget — the router no longer picks it, its link is closed, the health check re-drives
  // its jobs elsewhere as for a dead TE, and it may register again. NotFound when unknown.
  Status te_gone(const std::string& address);
  // Stops listening, closes every link, joins the monitor. Idempotent.
  void stop();
  // Applies TE `te_id`'s cache events to the router's prefix index (the KV-event subscriber's
  // callback).
  void apply_kv_events(std::string_view te_id, const KvEventBatch& batch);

 private:
  struct TeEntry;
  struct Job;
  using Clock = std::chrono::steady_clock;

  explicit JobExecutor(JobExecutorConfig config);
  Status connect_tes();
  void on_gateway_message(net::Link& link, net::Message message);
  void on_te_message(size_t te, net::Message message);
  // `received`: when the gateway's message came (the wait before handling is a hop).
  void on_submit_job(net::Link& link, const Json& body, Clock::time_point received);
  void on_abort_job(const Json& body);
  // KV kept across tool calls: the gateway's release of a job's pin, sent on to the TE that holds
  // it (sticky_pins.h); dropped when no TE is remembered for it.
  void on_release_kv_job(const Json& body);
  // The job keeps its KV on TE `te` (under mu_): remembered for its program and its release.
  void note_pin(const Job& job, size_t te) KEEL_REQUIRES(mu_);
  void apply_report(size_t te, LoadReport report);
  // Routes `job` (not yet on any TE) and sends it; Ok once a TE accepted it. `retry`: a parked
  // re-drive trying again (a decision with no capacity is not counted again). dispatch_async
  // returns at once and runs `done` once (on a TE link's thread, or inline when no TE can take
  // it); dispatch() waits for it (the monitor thread only).
  // `done` also gets the hops of the try that ended it (hop_timings.h: je_route, te_call and
  // the TE's own; an empty object when no TE answered).
  Status dispatch(const JobRef& ref, bool retry = false);
  void dispatch_async(const JobRef& ref, bool retry, std::function<void(Status, Json)> done);
  struct DispatchTry;
  // One try: the router's TE for the job and the asynchronous call to it (or `done`).
  void dispatch_step(std::shared_ptr<DispatchTry> d);
  // A TE's answer to a task: done, or the TE taken out of service and the next try.
  void on_task_reply(std::shared_ptr<DispatchTry> d, size_t te, Result<Json> reply);
  // Runs the router over the TEs that reported (under mu_): the TE to run the job (or its
  // prefill) and, for a disaggregated job, its decode TE.
  struct Choice {
    size_t te = 0;
    std::optional<size_t> decode_te;
    std::optional<PeerHint> peer;  // tier T3: a TE holding more of the prompt (peer_hint.h)
  };
  std::optional<Choice> choose_te(const Job& job, bool count_no_capacity = true) KEEL_REQUIRES(mu_);
  // The task that runs `job` on the chosen TE (under mu_): its live attempt moves there.
  SubmitTask task_for(Job& job, const Choice& chosen) KEEL_REQUIRES(mu_);
  // Takes TE `te` out of service after a task call failed with `why` (under mu_): dead when its
  // link is closed or it refused (stopping), hung when it did not answer in time (a stopped
  // process: its link is still open).
  void count_out(size_t te, const Result<Json>& why) KEEL_REQUIRES(mu_);
  // Tier T3: the peer the TE `te_id` could fetch the prompt's leading blocks from (under mu_).
  std::optional<PeerHint> peer_hint(const Job& job, const std::string& te_id) const
      KEEL_REQUIRES(mu_);
  // Sends a disaggregated job's decode half to its decode TE once its prefill handed off (on the
  // monitor thread); falls back to dispatch() when that TE cannot take it.
  void dispatch_decode(const JobRef& ref);
  // Admission (job_executor_admission.cpp). Holds a submitted job when admission is on (under
  // mu_); true when it was held (the gateway is answered at once).
  bool hold_locked(const Job& job) KEEL_REQUIRES(mu_);
  // Lets held jobs in while the fleet has room, dispatching each (not under mu_); fails the ones
  // held past admission_wait.
  void pump() KEEL_EXCLUDES(mu_);
  // Jobs that may run at once now: max_jobs_per_te × the TEs serving (under mu_).
  [[nodiscard]] int64_t admission_capacity_locked() const KEEL_REQUIRES(mu_);
  void monitor_loop();
  void check_health();
  void redrive(const JobRef& ref);
  // Retries the parked re-drives (no TE could take them) and fails those past their deadline.
  void retry_parked();
  void fail_job(const JobRef& ref, const std::string& error) KEEL_EXCLUDES(mu_);
  // Subscribes to the cache events of TEs that announced a publisher (on the monitor thread).
  void subscribe_kv_events();

  JobExecutorConfig config_;
  std::unique_ptr<net::LinkServer> server_;  // the gateways' links
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<TeEntry>> tes_ KEEL_GUARDED_BY(mu_);
  std::map<JobRef, std::unique_ptr<Job>> jobs_ KEEL_GUARDED_BY(mu_);
  std::vector<JobRef> to_redrive_ KEEL_GUARDED_BY(mu_);
  std::vector<JobRef> to_decode_ KEEL_GUARDED_BY(mu_);
  // Re-drives waiting for a TE, by deadline.
  std::map<JobRef, Clock::time_point> parked_ KEEL_GUARDED_BY(mu_);
  PrefixIndex index_ KEEL_GUARDED_BY(mu_);
  AdmissionQueue admission_ KEEL_GUARDED_BY(mu_);                        // held jobs (admission.h)
  std::map<JobRef, Clock::time_point> held_until_ KEEL_GUARDED_BY(mu_);  // their deadlines
  int64_t jobs_held_total_ KEEL_GUARDED_BY(mu_) = 0;
  std::vector<std::unique_ptr<KvEventSubscriber>> subscribers_;  // monitor thread only
  RouterCounters counters_ KEEL_GUARDED_BY(mu_);
  StickyPins sticky_ KEEL_GUARDED_BY(mu_);  // where calls that keep their KV left their pins
  // Predictor counters: predictions made, their total cost, predicted-vs-actual buckets.
  int64_t predictions_ KEEL_GUARDED_BY(mu_) = 0;
  double prediction_seconds_ KEEL_GUARDED_BY(mu_) = 0;
  std::map<std::pair<int32_t, int32_t>, int64_t> prediction_buckets_ KEEL_GUARDED_BY(mu_);
  uint64_t cursor_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t jobs_total_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t jobs_redriven_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t jobs_failed_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t jobs_resubmitted_ KEEL_GUARDED_BY(mu_) =
      0;  // jobs a gateway re-submitted after their JE died
  int64_t kv_link_blocked_ KEEL_GUARDED_BY(mu_) =
      0;  // prefills whose KV link was blocked (decode ran colocated)
  int64_t calls_in_flight_ KEEL_GUARDED_BY(mu_) =
      0;                                // asynchronous task calls not yet ended (stop() waits)
  std::unique_ptr<TaskQueue> delayed_;  // the submit_delay fault hook's timer thread
  TaskQueue control_{"je-control"};     // the cluster manager's add_te (it connects to the TE)
  std::thread monitor_;
};

}  // namespace keel::cluster
