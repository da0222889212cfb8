// TaskExecutor: the TE-shell around one engine — DeepServe's task executor minus the engine. It
// listens for job executors (JEs), runs the tasks they send on its engine, streams each task's
// token events straight to the gateway that owns the request (the address in the task; one
// outgoing link per gateway, made on first use), and reports to every connected JE, each report
// interval — and at once when a prefill task has handed off, so the JE starts its decode task
// without waiting — its load, the engine's stats and metrics, and the new tokens of the tasks that
// JE sent (so the JE can re-drive them elsewhere should this TE die).
//
// Invariants: a task is known from a successful submit until its final event has been reported
// to its JE; a task whose gateway link breaks is aborted on the engine (nobody would read it).
// The engine's sink runs on the engine thread and only queues (Link::send never blocks).
//
// Thread safety: start() and stop() from the owner's thread; tasks and aborts from the JEs are
// handled in arrival order on one intake thread — not the links' reader threads, since taking a
// task may wait on other processes (connecting to its gateway, a tier-T3 peer fetch of up to
// seconds); everything else runs on the links' reader threads, the engine thread and the report
// thread, under one mutex.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/kv/kv_handoff.h"
#include "cluster/kv/kv_peer_fetch.h"
#include "cluster/protocol/fleet.h"
#include "cluster/protocol/messages.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/task_queue.h"
#include "engine/engine_client.h"
#include "net/link.h"
#include "net/link_server.h"

namespace keel::cluster {

struct TaskExecutorConfig {
  std::string id = "te-0";
  TeRole role = TeRole::kColocated;
  std::string model;  // served model name
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0 = a free port
  std::chrono::milliseconds report_interval{50};
  std::chrono::milliseconds connect_timeout{2000};  // to a gateway's event address
  // The engine's cache-event publisher (kv_event_publisher.h), announced in every report so JEs
  // subscribe; empty: none.
  std::string kv_events;
  std::string kv_events_replay;
  // A prefill TE: pushes a prefill-only task's prompt blocks to its decode TE (must outlive the
  // TaskExecutor). A decode TE: the address of its KV transfer server, announced in reports.
  KvHandoff* handoff = nullptr;
  std::string kv_transfer;
  // Tier T3 (must outlive the TaskExecutor): a task carrying a PeerHint first lets the fetcher
  // pull the hinted blocks into the host tier (bounded wait, on the JE link's reader thread);
  // kv_fetch: this TE's own fetch service, announced in reports so the JE can point peers at it.
  KvPeerFetcher* peer_fetch = nullptr;
  std::string kv_fetch;
  // The engine is semi-PD (a colocated TE: LoadReport::semi_pd); the engine's stats already
  // count both workers' queues.
  bool semi_pd = false;
  int32_t pp_stages = 1;  // pipeline stages of the engine (LoadReport::pp_stages)
};

class TaskExecutor {
 public:
  // `engine` must outlive the TaskExecutor (stop() first).
  static Result<std::unique_ptr<TaskExecutor>> start(TaskExecutorConfig config,
                                                     engine::EngineClient* engine);
  ~TaskExecutor();
  TaskExecutor(const TaskExecutor&) = delete;
  TaskExecutor& operator=(const TaskExecutor&) = delete;

  [[nodiscard]] uint16_t port() const { return server_->port(); }
  [[nodiscard]] std::string address() const { return server_->address(); }
  // Tasks running now.
  [[nodiscard]] size_t num_tasks() const;
  // Stops listening and reporting, aborts running tasks and closes every link. Idempotent.
  void stop();

  struct Task;          // one task's state, shared with its engine sink
  struct ReportSignal;  // wakes the report thread early (a prefill handed off)

 private:
  explicit TaskExecutor(TaskExecutorConfig config, engine::EngineClient* engine);
  void on_message(net::Link& link, net::Message message);
  // `received`: when the JE's message came (the intake wait is a hop: hop_timings.h).
  void on_submit(net::Link& link, const Json& body, std::chrono::steady_clock::time_point received);
  // The task of `msg`, from JE link `je`, its events going to `gateway` (not yet shared).
  std::shared_ptr<Task> new_task(const SubmitTask& msg, net::Link& je,
                                 std::shared_ptr<net::Link> gateway);
  // Runs `task` on the engine (a tier-T3 peer fetch and a prefill's KV handoff begun first) and
  // sets its key; consumes msg.request.
  Status start_task(const std::shared_ptr<Task>& task, SubmitTask& msg);
  void on_abort(const Json& body);
  // KV kept across tool calls: the JE's release_kv_task — the pin the engine left for that job's
  // task goes (docs/agent-kv.md); unknown jobs are ignored.
  void on_release_kv(const Json& body);
  Result<std::shared_ptr<net::Link>> gateway_link(const std::string& address);
  void report_loop();
  void send_reports();

  TaskExecutorConfig config_;
  engine::EngineClient* engine_;
  std::unique_ptr<net::LinkServer> server_;  // the JEs' links

  mutable Mutex mu_;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  // By event address.
  std::map<std::string, std::shared_ptr<net::Link>> gateway_links_ KEEL_GUARDED_BY(mu_);
  std::map<JobRef, std::shared_ptr<Task>> tasks_ KEEL_GUARDED_BY(mu_);
  // Tasks that asked to keep their KV: their engine keys, kept past the task (a release comes
  // after the job ended), at most kMaxKept, the oldest forgotten first (its pin ends at its TTL).
  static constexpr size_t kMaxKept = 65536;
  std::map<JobRef, engine::RequestKey> kept_ KEEL_GUARDED_BY(mu_);
  std::deque<JobRef> kept_order_ KEEL_GUARDED_BY(mu_);
  std::shared_ptr<ReportSignal> report_now_;  // shared with tasks (their handoffs wake it)
  std::thread reporter_;
  TaskQueue intake_{"te-intake"};  // on_submit and on_abort, in arrival order
};

}  // namespace keel::cluster
