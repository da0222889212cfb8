// TaskExecutor (see task_executor.h): tasks in, events out to gateways, reports out to JEs.
#include "cluster/task/task_executor.h"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <utility>

#include "core/log.h"

namespace keel::cluster {

// Wakes the report thread before its interval: a prefill that handed off is reported at once, so
// the JE starts the decode task without waiting for the next periodic report.
struct TaskExecutor::ReportSignal {
  Mutex mu;
  std::condition_variable cv;
  bool pending KEEL_GUARDED_BY(mu) = false;
  bool stopping KEEL_GUARDED_BY(mu) = false;
  void wake() {
    MutexLock lock(mu);
    pending = true;
    cv.notify_all();
  }
};

// One task: written by the engine's sink (engine thread) and read by the report thread. The
// fields above mu are set before the engine sees the task and never change.
struct TaskExecutor::Task {
  JobRef ref;
  int32_t attempt = 0;
  engine::EngineClient* engine = nullptr;
  std::shared_ptr<net::Link> je;       // the JE that sent it (reports go there)
  std::shared_ptr<net::Link> gateway;  // where its events go
  int64_t prompt_tokens = 0;
  int32_t max_tokens = 0;
  bool prefill_only = false;  // the prefill half of a disaggregated job
  std::string transfer_to;
  KvHandoff* handoff = nullptr;
  std::shared_ptr<ReportSignal> report_now;

  Mutex mu;
  // submit()'s key; 0 until submit() returns (the engine's events may come before).
  engine::RequestKey key KEEL_GUARDED_BY(mu) = 0;
  bool abort_wanted KEEL_GUARDED_BY(mu) = false;  // abort() came before the key: start_task aborts
  // KvHandoff::begin's id; -1: none (or finished / abandoned).
  int64_t handoff_id KEEL_GUARDED_BY(mu) = -1;
  // Generated-token index of the next token (starts at resumed tokens).
  int32_t next_index KEEL_GUARDED_BY(mu) = 0;
  int32_t generated KEEL_GUARDED_BY(mu) = 0;  // tokens this attempt generated
  std::vector<int32_t> unreported KEEL_GUARDED_BY(mu);
  bool finished KEEL_GUARDED_BY(mu) = false;  // its final event was produced
  // Its final event was written to the gateway's socket (and a prefill's KV handed off).
  bool written_final KEEL_GUARDED_BY(mu) = false;
  // The final event ended the request (not a prefill handing off).
  bool ended_job KEEL_GUARDED_BY(mu) = true;
  bool kv_link_blocked KEEL_GUARDED_BY(mu) = false;  // its handoff found the KV link blocked
  bool reported_finished KEEL_GUARDED_BY(mu) = false;

  // Aborts the request on the engine; before submit() has returned its key, start_task does.
  void abort() KEEL_EXCLUDES(mu) {
    engine::RequestKey k = 0;
    {
      MutexLock lock(mu);
      k = key;
      if (k == 0) abort_wanted = true;
    }
    if (k != 0) engine->abort(k);
  }
};

namespace {

// The engine's sink for one task: forwards each event to the gateway, keeps the tokens for the
// JE's next report.
class TaskSink final : public engine::OutputSink {
 public:
  explicit TaskSink(std::shared_ptr<TaskExecutor::Task> task) : task_(std::move(task)) {}

  void on_event(engine::TokenEvent event) override {
    TaskExecutor::Task& t = *task_;
    TaskEvent out;
    {
      MutexLock lock(t.mu);
      if (t.finished) return;
      out.job = t.ref.job;
      out.attempt = t.attempt;
      out.first_index = t.next_index;
      t.next_index += static_cast<int32_t>(event.tokens.size());
      t.generated += static_cast<int32_t>(event.tokens.size());
      if (event.finish) t.finished = true;
    }
    const bool final_event = event.finish.has_value();
    // A prefill that reached its one token hands the request on: the gateway must not see an end.
    const bool handing_off = t.prefill_only && event.finish == engine::FinishReason::kLength;
    // The prefill's last step just ended (this runs on the engine thread right after it).
    const auto prefill_end = KvHandoff::Clock::now();
    if (final_event && !handing_off) abandon_handoff(t);
    if (handing_off) event.finish.reset();
    std::vector<int32_t> tokens = event.tokens;
    out.event = std::move(event);
    // The JE learns of tokens only once they are on their way to the gateway (in the socket
    // buffer), so what it would re-drive from never runs ahead of what the client got.
    auto written = [task = task_, tokens = std::move(tokens), final_event, handing_off,
                    prefill_end]() {
      {
        MutexLock lock(task->mu);
        task->unreported.insert(task->unreported.end(), tokens.begin(), tokens.end());
        if (final_event && !handing_off) task->written_final = true;
      }
      if (handing_off) start_handoff(task, prefill_end);
    };
    if (!t.gateway->send(encode(out), std::move(written)) && !final_event) t.abort();
  }

 private:
  // After a prefill's token is written: complete its KV handoff (in stream mode most blocks are
  // already sent), then report it finished (not ending the job). Without a handoff or
  // destination, the decode TE simply recomputes the prompt.
  static void start_handoff(const std::shared_ptr<TaskExecutor::Task>& task,
                            KvHandoff::Clock::time_point prefill_end) {
    auto finish = [task](const KvHandoffResult& r) {
      if (!r.status.ok()) {
        KEEL_LOG_WARN("te: KV handoff of job {} to {} failed after {} blocks: {}", task->ref.job,
                      task->transfer_to, r.blocks, r.status.message());
      }
      // The exposed-time record (bench/kv_handoff.sh reads it).
      KEEL_LOG_INFO(
          "te: kv_handoff job={} mode={} blocks={} streamed={} bytes={} exposed_ms={:.3f}",
          task->ref.job, kv_handoff_mode_name(task->handoff->mode()), r.blocks, r.streamed, r.bytes,
          r.exposed_seconds * 1e3);
      {
        MutexLock lock(task->mu);
        task->ended_job = false;
        task->kv_link_blocked = r.link_blocked;
        task->written_final = true;
      }
      task->report_now->wake();
    };
    int64_t id = -1;
    {
      MutexLock lock(task->mu);
      id = std::exchange(task->handoff_id, -1);
    }
    if (id < 0) {
      {
        MutexLock lock(task->mu);
        task->ended_job = false;
        task->written_final = true;
      }
      task->report_now->wake();
      return;
    }
    task->handoff->finish(id, prefill_end, finish);
  }

  // A prefill task that ended without handing off (aborted, failed): its blocks are not wanted.
  static void abandon_handoff(TaskExecutor::Task& t) {
    int64_t id = -1;
    {
      MutexLock lock(t.mu);
      id = std::exchange(t.handoff_id, -1);
    }
    if (id >= 0) t.handoff->abandon(id);
  }

  std::shared_ptr<TaskExecutor::Task> task_;
};

}  // namespace

TaskExecutor::TaskExecutor(TaskExecutorConfig config, engine::EngineClient* engine)
    : config_(std::move(config)), engine_(engine), report_now_(std::make_shared<ReportSignal>()) {}

Result<std::unique_ptr<TaskExecutor>> TaskExecutor::start(TaskExecutorConfig config,
                                                          engine::EngineClient* engine) {
  if (engine == nullptr) return Status::invalid_argument("task executor: no engine");
  std::unique_ptr<TaskExecutor> te(new TaskExecutor(std::move(config), engine));
  TaskExecutor* self = te.get();
  KEEL_ASSIGN_OR_RETURN(te->server_,
                        net::LinkServer::start(te->config_.host, te->config_.port,
                                               [self](net::Link& link, net::Message m) {
                                                 self->on_message(link, std::move(m));
                                               }));
  te->reporter_ = std::thread([self] { self->report_loop(); });
  return te;
}

TaskExecutor::~TaskExecutor() { stop(); }

size_t TaskExecutor::num_tasks() const {
  MutexLock lock(mu_);
  return tasks_.size();
}

void TaskExecutor::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  {
    MutexLock lock(report_now_->mu);
    report_now_->stopping = true;
    report_now_->cv.notify_all();
  }
  if (reporter_.joinable()) reporter_.join();
  intake_.stop();  // the task it handles now finishes; the rest are dropped (their JEs re-drive)
  std::vector<std::shared_ptr<net::Link>> links;
  std::map<JobRef, std::shared_ptr<Task>> tasks;
  {
    MutexLock lock(mu_);
    for (auto& [address, link] : gateway_links_) links.push_back(link);
    tasks.swap(tasks_);
  }
  for (auto& [ref, task] : tasks) task->abort();
  server_->stop();  // the JEs' links closed, their readers joined
  for (auto& link : links) link->close();
  // The gateways' links' threads end on close; they are joined when the last reference goes.
  MutexLock lock(mu_);
  gateway_links_.clear();
}

void TaskExecutor::on_message(net::Link& link, net::Message message) {
  if (message.type == msg::kSubmitTask || message.type == msg::kAbortTask ||
      message.type == msg::kReleaseKvTask) {
    intake_.post([this, je = link.shared_from_this(), m = std::move(message),
                  received = std::chrono::steady_clock::now()] {
      if (m.type == msg::kSubmitTask) return on_submit(*je, m.body, received);
      if (m.type == msg::kReleaseKvTask) return on_release_kv(m.body);
      on_abort(m.body);
    });
    return;
  }
  KEEL_LOG_WARN("te {}: unexpected message '{}' from {}", config_.id, message.type, link.peer());
}

Result<std::shared_ptr<net::Link>> TaskExecutor::gateway_link(const std::string& address) {
  {
    MutexLock lock(mu_);
    const auto it = gateway_links_.find(address);
    if (it != gateway_links_.end() && !it->second->closed()) return it->second;
  }
  KEEL_ASSIGN_OR_RETURN(std::shared_ptr<net::Link> link,
                        net::Link::connect(address, config_.connect_timeout, nullptr, nullptr));
  MutexLock lock(mu_);
  auto& slot = gateway_links_[address];
  if (slot && !slot->closed()) return slot;  // another task connected first
  slot = link;
  return link;
}

void TaskExecutor::on_submit(net::Link& link, const Json& body,
                             std::chrono::steady_clock::time_point received) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point taken = Clock::now();
  const auto call_id = body.find("call_id");
  if (call_id == body.end() || !call_id->is_number_integer()) return;
  const int64_t call = call_id->get<int64_t>();
  Result<SubmitTask> task_msg = decode_submit_task(body);
  if (!task_msg.ok()) {
    link.reply(call, status_body(task_msg.status()));
    return;
  }
  Result<std::shared_ptr<net::Link>> gateway = gateway_link(task_msg->reply_to);
  if (!gateway.ok()) {
    link.reply(call, status_body(gateway.status()));
    return;
  }
  const std::shared_ptr<Task> task = new_task(*task_msg, link, *gateway);
  const bool keep_kv = task_msg->request.keep_kv && !task_msg->prefill_only;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      link.reply(call, status_body(Status::unavailable("task executor is stopping")));
      return;
    }
  }
  if (Status st = start_task(task, *task_msg); !st.ok()) {
    link.reply(call, status_body(st));
    return;
  }
  engine::RequestKey key = 0;
  if (keep_kv) {
    MutexLock lock(task->mu);
    key = task->key;
  }
  {
    MutexLock lock(mu_);
    tasks_[task->ref] = task;
    if (keep_kv && key != 0) {  // its release comes after the job ended (on_release_kv)
      if (kept_.insert_or_assign(task->ref, key).second) kept_order_.push_back(task->ref);
      while (kept_order_.size() > kMaxKept) {
        kept_.erase(kept_order_.front());
        kept_order_.pop_front();
      }
    }
  }
  // Hop timings (hop_timings.h), on this process's clock.
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  Json reply = status_body(Status());
  reply["hops"] =
      Json{{"te_intake", seconds(taken - received)}, {"te_submit", seconds(Clock::now() - taken)}};
  link.reply(call, std::move(reply));
}

std::shared_ptr<TaskExecutor::Task> TaskExecutor::new_task(const SubmitTask& msg, net::Link& je,
                                                           std::shared_ptr<net::Link> gateway) {
  auto task = std::make_shared<Task>();
  task->ref = msg.ref;
  task->attempt = msg.attempt;
  task->engine = engine_;
  task->gateway = std::move(gateway);
  task->prompt_tokens = static_cast<int64_t>(msg.request.prompt_tokens.size());
  task->max_tokens = msg.request.max_tokens;
  task->prefill_only = msg.prefill_only;
  task->transfer_to = msg.transfer_to;
  task->handoff = config_.handoff;
  task->report_now = report_now_;
  task->je = je.shared_from_this();
  MutexLock lock(task->mu);  // nobody else sees it yet; the analysis wants it all the same
  task->next_index = msg.request.resumed_tokens;
  return task;
}

Status TaskExecutor::start_task(const std::shared_ptr<Task>& task, SubmitTask& msg) {
  // Tier T3: pull what the hinted peer holds into the host tier first (the cost model may say
  // recompute instead); whatever does not arrive is recomputed by the engine.
  if (config_.peer_fetch != nullptr && !msg.peer.address.empty()) {
    const PeerFetchOutcome f =
        config_.peer_fetch->fetch(msg.peer, msg.request.prompt_tokens, msg.request.cache_salt);
    if (!f.status.ok()) {
      KEEL_LOG_WARN("te {}: peer fetch of job {} from {} got {}/{} blocks: {}", config_.id,
                    task->ref.job, msg.peer.te_id, f.blocks, f.hinted_blocks, f.status.message());
    }
  }
  if (task->prefill_only && task->handoff != nullptr && !task->transfer_to.empty()) {
    // Before the engine sees it: a streamed handoff watches for the blocks from the first step.
    const int64_t id =
        task->handoff->begin(msg.request.prompt_tokens, msg.request.cache_salt, task->transfer_to);
    MutexLock lock(task->mu);
    task->handoff_id = id;
  }
  // The sink holds the task, so events that come before it is registered (the engine may finish
  // it before submit returns) are kept for the next report.
  Result<engine::RequestKey> key =
      engine_->submit(std::move(msg.request), std::make_shared<TaskSink>(task));
  int64_t abandon_id = -1;
  bool abort_now = false;
  {
    MutexLock lock(task->mu);
    if (!key.ok()) {
      abandon_id = std::exchange(task->handoff_id, -1);
    } else {
      task->key = *key;
      abort_now = task->abort_wanted;  // its sink wanted it gone before the key was known
    }
  }
  if (abandon_id >= 0) task->handoff->abandon(abandon_id);
  if (abort_now) engine_->abort(*key);
  return key.ok() ? Status() : key.status();
}

void TaskExecutor::on_abort(const Json& body) {
  Result<AbortTask> abort = decode_abort(body);
  if (!abort.ok()) return;
  std::shared_ptr<Task> task;
  {
    MutexLock lock(mu_);
    const auto it = tasks_.find(abort->ref);
    // An abort names the newest attempt it means: an older one goes too (a job re-submitted
    // after its JE died aborts whatever attempt its old JE left running), a newer one never.
    if (it == tasks_.end() || it->second->attempt > abort->attempt) return;
    task = it->second;
  }
  task->abort();
}

void TaskExecutor::on_release_kv(const Json& body) {
  Result<AbortTask> release = decode_abort(body);
  if (!release.ok()) return;
  engine::RequestKey key = 0;
  {
    MutexLock lock(mu_);
    const auto it = kept_.find(release->ref);
    if (it == kept_.end()) return;
    key = it->second;
    kept_.erase(it);  // its place in kept_order_ goes when it comes to the front
  }
  engine_->release_kv_pin(key);  // a message to the engine thread; never waits
}

void TaskExecutor::report_loop() {
  ReportSignal& signal = *report_now_;
  UniqueLock lock(signal.mu);
  while (!signal.stopping) {
    signal.cv.wait_for(lock.native(), config_.report_interval, [&] {
      signal.mu.assert_held();  // a wait's predicate runs under its lock
      return signal.stopping || signal.pending;
    });
    if (signal.stopping) return;
    signal.pending = false;
    lock.unlock();
    send_reports();
    lock.lock();
  }
}

void TaskExecutor::send_reports() {
  const std::vector<std::shared_ptr<net::Link>> links = server_->links();
  std::vector<std::shared_ptr<Task>> tasks;
  {
    MutexLock lock(mu_);
    for (auto& [ref, task] : tasks_) tasks.push_back(task);
  }
  engine::EngineStats stats = engine_->stats();
  if (config_.peer_fetch != nullptr) {
    const KvPeerFetchStats p = config_.peer_fetch->stats();
    stats.peer_decisions_fetch = p.decisions_fetch;
    stats.peer_decisions_recompute = p.decisions_recompute;
    stats.peer_blocks_fetched = p.blocks_fetched;
    stats.peer_hit_tokens = p.hit_tokens;
  }
  LoadReport base;
  base.te_id = config_.id;
  base.role = config_.role;
  base.model = config_.model;
  base.pid = getpid();
  base.kv_events = config_.kv_events;
  base.kv_events_replay = config_.kv_events_replay;
  base.kv_transfer = config_.kv_transfer;
  base.kv_fetch = config_.kv_fetch;
  base.semi_pd = config_.semi_pd;
  base.pp_stages = config_.pp_stages;
  base.max_model_len = engine_->max_model_len();
  base.max_waiting = engine_->max_waiting();
  base.stats = stats;
  base.metrics = engine_->metrics();
  base.load.num_waiting = stats.num_waiting;
  base.load.num_running = stats.num_running;
  base.load.kv_blocks_used = stats.kv_blocks_used;
  base.load.kv_blocks_total = stats.kv_blocks_total;
  std::map<const net::Link*, std::vector<TaskProgress>> progress;
  std::vector<std::shared_ptr<Task>> done;
  for (const auto& task : tasks) {
    MutexLock lock(task->mu);
    if (!task->finished) {
      base.load.pending_tokens +=
          (task->generated == 0 ? task->prompt_tokens : 0) + (task->max_tokens - task->next_index);
    }
    // A final event that can never be written (the gateway is gone) still ends the task.
    if (task->finished && task->gateway->closed()) {
      task->written_final = true;
      if (task->handoff_id >= 0) task->handoff->abandon(std::exchange(task->handoff_id, -1));
    }
    if (task->unreported.empty() && task->written_final == task->reported_finished) continue;
    TaskProgress p{task->ref,           task->attempt,   std::move(task->unreported),
                   task->written_final, task->ended_job, task->kv_link_blocked};
    task->unreported.clear();
    task->reported_finished = task->written_final;
    if (task->written_final) done.push_back(task);
    progress[task->je.get()].push_back(std::move(p));
  }
  for (const auto& link : links) {
    LoadReport report = base;
    const auto it = progress.find(link.get());
    if (it != progress.end()) report.progress = std::move(it->second);
    link->send(encode(report));
  }
  MutexLock lock(mu_);
  for (const std::shared_ptr<Task>& task : done) {
    // Only that task: a newer attempt of the job (submitted again) may hold its place by now.
    const auto it = tasks_.find(task->ref);
    if (it != tasks_.end() && it->second == task) tasks_.erase(it);
  }
}

}  // namespace keel::cluster
