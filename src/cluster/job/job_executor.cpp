// JobExecutor (see job_executor.h): jobs in from gateways, tasks out to TEs, reports back,
// routing and dispatch. Failure handling (health, re-drives) is in job_executor_failures.cpp.
#include "cluster/job/job_executor.h"

#include <algorithm>
#include <utility>

#include "cluster/job/job_executor_entries.h"
#include "core/log.h"
#include "sampling/rng.h"

namespace keel::cluster {

JobExecutor::JobExecutor(JobExecutorConfig config)
    : config_(std::move(config)),
      admission_(config_.admission),
      sticky_(std::chrono::duration_cast<std::chrono::nanoseconds>(config_.kv_pin_ttl).count()) {}

Result<std::unique_ptr<JobExecutor>> JobExecutor::start(JobExecutorConfig config) {
  std::unique_ptr<JobExecutor> je(new JobExecutor(std::move(config)));
  KEEL_TRY(je->connect_tes());
  // Ready once every TE has reported (its load and limits), or at the connect timeout.
  const Clock::time_point deadline = Clock::now() + je->config_.connect_timeout;
  while (Clock::now() < deadline) {
    {
      MutexLock lock(je->mu_);
      if (std::all_of(je->tes_.begin(), je->tes_.end(),
                      [](const auto& t) { return t->reported || t->forgotten; })) {
        break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (je->config_.submit_delay.count() > 0) je->delayed_ = std::make_unique<TaskQueue>("je-delay");
  JobExecutor* self = je.get();
  KEEL_ASSIGN_OR_RETURN(je->server_,
                        net::LinkServer::start(je->config_.host, je->config_.port,
                                               [self](net::Link& link, net::Message m) {
                                                 self->on_gateway_message(link, std::move(m));
                                               }));
  je->monitor_ = std::thread([self] { self->monitor_loop(); });
  return je;
}

Status JobExecutor::add_te(const std::string& address) {
  size_t idx = 0;
  {
    MutexLock lock(mu_);
    if (stopping_) return Status::unavailable("job executor is stopping");
    for (const auto& te : tes_) {
      if (te->address != address) continue;
      if (!te->forgotten) return Status::invalid_argument("te " + address + " is known");
      te->address.clear();  // the forgotten record keeps no address a new one could be hidden by
      te->info.address.clear();
    }
    auto entry = std::make_unique<TeEntry>();
    entry->address = address;
    entry->info.id = address;
    entry->info.address = address;
    entry->info.healthy = false;  // until its first report
    entry->last_report = entry->last_progress = Clock::now();
    idx = tes_.size();
    tes_.push_back(std::move(entry));
  }
  Result<std::shared_ptr<net::Link>> link = net::Link::connect(
      address, config_.connect_timeout,
      [this, idx](net::Link&, net::Message m) { on_te_message(idx, std::move(m)); }, nullptr);
  MutexLock lock(mu_);
  if (!link.ok()) return link.status();  // stays unhealthy: never reported
  tes_[idx]->link = std::move(*link);
  KEEL_LOG_INFO("je {}: te {} added", config_.id, address);
  return {};
}

Status JobExecutor::remove_te(const std::string& address, bool forget) {
  std::shared_ptr<net::Link> to_close;
  {
    MutexLock lock(mu_);
    const auto it = std::find_if(tes_.begin(), tes_.end(), [&](const auto& te) {
      return !te->forgotten && (te->address == address || te->info.address == address);
    });
    if (it == tes_.end()) {
      return Status::not_found("te " + address + " is not in this job executor's fleet");
    }
    TeEntry& te = **it;
    te.draining = true;
    if (!forget) {
      KEEL_LOG_INFO("je {}: te {} ({}) draining: no new tasks", config_.id, te.info.id, address);
      return {};
    }
    te.forgotten = true;
    te.info.healthy = false;  // the health pass re-drives what it still had
    te.info.state = health::TeState::kDead;
    to_close = te.link;
    KEEL_LOG_INFO("je {}: te {} ({}) removed from the fleet", config_.id, te.info.id, address);
  }
  if (to_close) to_close->close();
  return {};
}

Status JobExecutor::te_gone(const std::string& address) {
  // As a forgotten TE: out of routing and off the fleet list, its link closed, its jobs re-driven
  // by the health pass; a TE that registers again at the same address is added anew.
  KEEL_LOG_WARN("je {}: te {} left the membership: out of service", config_.id, address);
  return remove_te(address, /*forget=*/true);
}

Status JobExecutor::connect_tes() {
  std::vector<std::string> addresses;
  {
    MutexLock lock(mu_);  // no other thread yet; held so every access to tes_ is under mu_
    for (const std::string& address : config_.te_addresses) {
      auto entry = std::make_unique<TeEntry>();
      entry->address = address;
      entry->info.id = address;
      entry->info.address = address;
      entry->info.healthy = false;  // until its first report
      entry->last_report = entry->last_progress = Clock::now();
      tes_.push_back(std::move(entry));
      addresses.push_back(address);
    }
  }
  // A TE that does not connect is left out (it died since it was named: a replacement JE is
  // started with the fleet as last seen) — the JE fails only when none connects.
  Status last;
  size_t connected = 0;
  for (size_t i = 0; i < addresses.size(); ++i) {
    Result<std::shared_ptr<net::Link>> link = net::Link::connect(
        addresses[i], config_.connect_timeout,
        [this, i](net::Link&, net::Message m) { on_te_message(i, std::move(m)); }, nullptr);
    MutexLock lock(mu_);
    if (!link.ok()) {
      KEEL_LOG_WARN("je {}: te {} left out: {}", config_.id, addresses[i], link.status().message());
      last = link.status();
      tes_[i]->forgotten = true;  // not listed; add_te may bring it back
      tes_[i]->info.state = health::TeState::kDead;
      continue;
    }
    tes_[i]->link = std::move(*link);
    ++connected;
  }
  if (connected == 0 && !addresses.empty()) return last;
  return {};
}

JobExecutor::~JobExecutor() { stop(); }

void JobExecutor::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (monitor_.joinable()) monitor_.join();
  if (delayed_) delayed_->stop();
  control_.stop();
  for (auto& sub : subscribers_) sub->stop();
  if (server_) server_->stop();  // the gateways' links closed, their readers joined
  std::vector<std::shared_ptr<net::Link>> links;
  {
    MutexLock lock(mu_);
    for (const auto& te : tes_) {
      if (te->link) links.push_back(te->link);
    }
  }
  for (const auto& link : links) link->close();
  // Their readers fail the task calls still out; their continuations touch this JE.
  UniqueLock lock(mu_);
  cv_.wait_for(lock.native(), std::chrono::seconds(10), [&] {
    mu_.assert_held();  // a wait's predicate runs under its lock
    return calls_in_flight_ == 0;
  });
}

void JobExecutor::on_gateway_message(net::Link& link, net::Message message) {
  const Clock::time_point received = Clock::now();
  const bool job_message = message.type == msg::kSubmitJob || message.type == msg::kAbortJob;
  if (job_message && delayed_ != nullptr) {  // the fault hook: a slow JE (aborts keep order)
    delayed_->post_after(config_.submit_delay, [this, gateway = link.shared_from_this(),
                                                m = std::move(message), received] {
      if (m.type == msg::kSubmitJob) return on_submit_job(*gateway, m.body, received);
      on_abort_job(m.body);
    });
    return;
  }
  if (message.type == msg::kSubmitJob) return on_submit_job(link, message.body, received);
  if (message.type == msg::kAbortJob) return on_abort_job(message.body);
  if (message.type == msg::kReleaseKvJob) return on_release_kv_job(message.body);
  if (message.type == msg::kFleet) {
    const auto id = message.body.find("call_id");
    if (id != message.body.end() && id->is_number_integer()) {
      link.reply(id->get<int64_t>(), encode_body(status()));
    }
    return;
  }
  if (message.type == msg::kAddTe) {
    const auto id = message.body.find("call_id");
    const auto address = message.body.find("address");
    if (id == message.body.end() || !id->is_number_integer()) return;
    if (address == message.body.end() || !address->is_string()) {
      link.reply(id->get<int64_t>(), status_body(Status::invalid_argument("add_te: no address")));
      return;
    }
    // Connecting to the TE may take up to connect_timeout: not on this link's reader thread.
    control_.post(
        [this, gateway = link.shared_from_this(), call = id->get<int64_t>(),
         te = address->get<std::string>()] { gateway->reply(call, status_body(add_te(te))); });
    return;
  }
  if (message.type == msg::kRemoveTe) {
    const auto id = message.body.find("call_id");
    if (id == message.body.end() || !id->is_number_integer()) return;
    Result<RemoveTe> remove = decode_remove_te(message.body);
    link.reply(
        id->get<int64_t>(),
        status_body(remove.ok() ? remove_te(remove->address, remove->forget) : remove.status()));
    return;
  }
  KEEL_LOG_WARN("je {}: unexpected message '{}' from {}", config_.id, message.type, link.peer());
}

void JobExecutor::on_submit_job(net::Link& link, const Json& body, Clock::time_point received) {
  const Clock::time_point handled = Clock::now();
  const auto call_id = body.find("call_id");
  if (call_id == body.end() || !call_id->is_number_integer()) return;
  const int64_t call = call_id->get<int64_t>();
  Result<SubmitJob> submit = decode_submit_job(body);
  if (!submit.ok()) {
    link.reply(call, status_body(submit.status()));
    return;
  }
  auto job = std::make_unique<Job>();
  job->ref = submit->ref;
  job->gateway = link.shared_from_this();
  job->reply_to = submit->reply_to;
  job->request = std::move(submit->request);
  if (!job->request.sampling.seed) job->request.sampling.seed = sampling::random_seed();
  // A job whose JE died, re-submitted by its gateway: the tokens the client has end its prompt;
  // they are the job's generated tokens from here on, as if this JE had seen them reported.
  const int32_t resumed = job->request.resumed_tokens;
  if (resumed > 0 && resumed < static_cast<int32_t>(job->request.prompt_tokens.size())) {
    const auto first = job->request.prompt_tokens.end() - resumed;
    job->generated.assign(first, job->request.prompt_tokens.end());
    job->request.prompt_tokens.erase(first, job->request.prompt_tokens.end());
  }
  job->request.resumed_tokens = 0;
  job->attempt = std::max(submit->attempt, 0);
  if (job->request.lora.empty()) {
    job->block_hashes = prompt_block_hashes(config_.model_key, job->request.cache_salt,
                                            job->request.prompt_tokens, config_.block_size);
  } else if (auto k = config_.lora_keys.find(job->request.lora); k != config_.lora_keys.end()) {
    job->block_hashes = prompt_block_hashes(k->second, job->request.cache_salt,
                                            job->request.prompt_tokens, config_.block_size);
  }
  bool held = false;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      link.reply(call, status_body(Status::unavailable("job executor is stopping")));
      return;
    }
    if (jobs_.count(job->ref) != 0) {
      link.reply(call, status_body(Status::invalid_argument("duplicate job")));
      return;
    }
    ++jobs_total_;
    if (job->attempt > 0) {
      ++jobs_resubmitted_;
      // Whatever attempt its old JE left running goes (a TE aborts that attempt and older ones),
      // before the new one is sent on the same links.
      for (const auto& te : tes_) {
        if (te->link && !te->forgotten) {
          te->link->send(encode_abort_task(AbortTask{job->ref, job->attempt - 1}));
        }
      }
    }
    held = hold_locked(*job);
    jobs_[job->ref] = std::move(job);
  }
  if (held) {  // answered now; the monitor lets it in when there is room (pump)
    Json reply = status_body(Status::ok_status());
    reply["hops"] = Json{{"je_wait", std::chrono::duration<double>(handled - received).count()}};
    link.reply(call, std::move(reply));
    cv_.notify_all();
    return;
  }
  // The TE's answer comes back on its link's threads: the gateway is answered from there.
  const bool resubmitted = submit->attempt > 0;
  dispatch_async(submit->ref, /*retry=*/false,
                 [this, gateway = link.shared_from_this(), call, ref = submit->ref, resubmitted,
                  wait = handled - received](Status s, Json hops) {
                   if (!s.ok()) {
                     MutexLock lock(mu_);
                     if (resubmitted && s.code() == StatusCode::kUnavailable) {
                       // A job its old JE was running: this JE owns it now, and waits for a TE
                       // as a re-drive does (retry_parked), rather than have the gateway submit
                       // it again and again.
                       parked_.emplace(ref, Clock::now() + config_.redrive_wait);
                       s = Status::ok_status();
                     } else {
                       jobs_.erase(ref);
                     }
                   }
                   Json reply = status_body(s);
                   hops["je_wait"] = std::chrono::duration<double>(wait).count();
                   reply["hops"] = std::move(hops);  // hop_timings.h
                   gateway->reply(call, std::move(reply));
                 });
}

void JobExecutor::on_abort_job(const Json& body) {
  Result<AbortTask> abort = decode_abort(body);
  if (!abort.ok()) return;
  std::shared_ptr<net::Link> te_link;
  AbortTask task{abort->ref, 0};
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(abort->ref);
    if (it == jobs_.end()) return;
    if (admission_.remove(abort->ref)) {  // aborted while held: nothing runs it
      held_until_.erase(abort->ref);
      jobs_.erase(it);
      return;
    }
    it->second->aborted = true;
    task.attempt = it->second->attempt;
    if (it->second->te) te_link = tes_[*it->second->te]->link;
  }
  if (te_link) te_link->send(encode_abort_task(task));
}

void JobExecutor::on_release_kv_job(const Json& body) {
  Result<AbortTask> release = decode_abort(body);
  if (!release.ok()) return;
  std::shared_ptr<net::Link> te_link;
  {
    MutexLock lock(mu_);
    const int64_t now =
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
            .count();
    const std::optional<std::string> te_id = sticky_.take_job(release->ref, now);
    if (!te_id) return;
    for (const auto& te : tes_) {
      if (te->info.id == *te_id && !te->forgotten) te_link = te->link;
    }
  }
  // A TE that died took its pins with it: the send fails, nothing waits.
  if (te_link) te_link->send(encode_release_kv_task(AbortTask{release->ref, 0}));
}

void JobExecutor::note_pin(const Job& job, size_t te) {
  if (config_.kv_pin_ttl.count() <= 0) return;
  const int64_t now =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  sticky_.note(job.request.tenant, job.request.program, job.ref, tes_[te]->info.id, now);
}

void JobExecutor::apply_kv_events(std::string_view te_id, const KvEventBatch& batch) {
  MutexLock lock(mu_);
  const Status s = index_.apply(te_id, batch);
  if (!s.ok()) KEEL_LOG_WARN("je {}: cache events of {}: {}", config_.id, te_id, s.message());
}

void JobExecutor::on_te_message(size_t te, net::Message message) {
  if (message.type != msg::kLoadReport) {
    KEEL_LOG_WARN("je {}: unexpected message '{}' from a TE", config_.id, message.type);
    return;
  }
  Result<LoadReport> report = decode_load_report(message.body);
  if (!report.ok()) {
    KEEL_LOG_WARN("je {}: bad load report: {}", config_.id, report.status().message());
    return;
  }
  apply_report(te, std::move(*report));
}

void JobExecutor::apply_report(size_t te, LoadReport report) {
  MutexLock lock(mu_);
  TeEntry& e = *tes_[te];
  if (e.forgotten) return;  // a report still in flight from a TE removed for good
  const Clock::time_point now = Clock::now();
  if (!e.reported) {
    e.reported = true;
    e.info.healthy = true;
    e.last_steps = report.stats.steps_total;
    e.last_progress = now;
  } else if (!e.info.healthy) {
    return;  // counted dead: stays dead
  }
  e.last_report = now;
  e.info.id = report.te_id;
  e.info.role = report.role;
  e.info.semi_pd = report.semi_pd;
  e.info.pp_stages = report.pp_stages;
  e.info.model = report.model;
  e.info.pid = report.pid;
  e.kv_events = report.kv_events;
  e.kv_events_replay = report.kv_events_replay;
  e.kv_transfer = report.kv_transfer;
  e.kv_fetch = report.kv_fetch;
  e.info.load = report.load;
  e.max_model_len = report.max_model_len;
  e.max_waiting = report.max_waiting;
  if (report.stats.steps_total != e.last_steps) e.last_progress = now;
  e.last_steps = report.stats.steps_total;
  e.stats = std::move(report.stats);
  e.metrics = std::move(report.metrics);
  for (TaskProgress& p : report.progress) {
    if (!p.tokens.empty() || p.finished) e.last_progress = now;
    const auto it = jobs_.find(p.ref);
    if (it == jobs_.end() || it->second->attempt != p.attempt) continue;
    Job& job = *it->second;
    job.generated.insert(job.generated.end(), p.tokens.begin(), p.tokens.end());
    admission_.charge_generated(job.request.tenant, static_cast<int64_t>(p.tokens.size()),
                                job.request.program);
    if (p.finished && p.ended_job) {
      if (job.request.keep_kv && job.te) note_pin(job, *job.te);  // its pin's TTL starts now
      if (job.predicted_bucket && config_.bucket_of) {
        const int32_t actual = config_.bucket_of(static_cast<int64_t>(job.generated.size()));
        ++prediction_buckets_[{*job.predicted_bucket, actual}];
      }
      jobs_.erase(it);
      if (!admission_.empty()) cv_.notify_all();  // room for a held job: the monitor pumps
    } else if (p.finished) {  // a prefill handed off: its decode half goes out next
      // ... to the prefill TE itself when the KV link was blocked: it holds the prompt's KV.
      if (p.kv_link_blocked && job.te) {
        job.decode_te = job.te;
        ++kv_link_blocked_;
      }
      job.te.reset();
      to_decode_.push_back(p.ref);
    }
  }
}

void JobExecutor::subscribe_kv_events() {
  std::vector<KvEventSource> sources;
  {
    MutexLock lock(mu_);
    for (auto& te : tes_) {
      if (te->subscribed || te->kv_events.empty() || !te->info.healthy) continue;
      te->subscribed = true;
      sources.push_back(KvEventSource{te->info.id, te->kv_events, te->kv_events_replay});
    }
  }
  if (sources.empty()) return;
  KvEventSubscriberConfig config;
  config.sources = std::move(sources);
  Result<std::unique_ptr<KvEventSubscriber>> sub = KvEventSubscriber::start(
      std::move(config), [this](const std::string& te_id, int64_t, const KvEventBatch& batch) {
        apply_kv_events(te_id, batch);
      });
  if (!sub.ok()) {
    KEEL_LOG_WARN("je {}: cannot subscribe to cache events: {}", config_.id,
                  sub.status().message());
    return;
  }
  subscribers_.push_back(std::move(*sub));
}

FleetStatus JobExecutor::status() const {
  MutexLock lock(mu_);
  FleetStatus s;
  s.je_id = config_.id;
  std::vector<TeInfo> infos;
  std::vector<std::string> forgotten;
  for (const auto& te : tes_) {
    infos.push_back(te->info);
    if (te->forgotten) forgotten.push_back(te->info.address);
  }
  for (size_t i : listed_tes(infos, forgotten)) {
    const TeEntry& te = *tes_[i];
    if (te.info.healthy && te.max_model_len > 0) {
      s.max_model_len =
          s.max_model_len == 0 ? te.max_model_len : std::min(s.max_model_len, te.max_model_len);
      s.max_waiting += te.max_waiting;
    }
    s.fleet.tes.push_back(te.info);
    s.stats.push_back(te.stats);
    s.metrics.push_back(te.metrics);
  }
  s.jobs_active = static_cast<int64_t>(jobs_.size());
  s.jobs_total = jobs_total_;
  s.jobs_redriven = jobs_redriven_;
  s.jobs_failed = jobs_failed_;
  s.jobs_resubmitted = jobs_resubmitted_;
  s.router = Json{{"sticky", counters_.sticky},
                  {"locality", counters_.locality},
                  {"least_load", counters_.least_load},
                  {"round_robin", counters_.round_robin},
                  {"no_capacity", counters_.no_capacity},
                  {"pd_colocated", counters_.pd_colocated},
                  {"pd_disaggregated", counters_.pd_disaggregated},
                  {"role_fallback", counters_.role_fallback},
                  {"matched_blocks", counters_.matched_blocks},
                  {"kv_link_blocked", kv_link_blocked_},
                  // How a mixed fleet chooses colocated or disaggregated (router.h).
                  {"pd_rule", config_.heatmap ? "heatmap" : "pairs_as_replicas"}};
  Json buckets = Json::array();
  for (const auto& [pa, n] : prediction_buckets_) buckets.push_back({pa.first, pa.second, n});
  s.predictor = Json{{"requests", predictions_},
                     {"seconds", prediction_seconds_},
                     {"buckets", std::move(buckets)}};
  return s;
}

}  // namespace keel::cluster
