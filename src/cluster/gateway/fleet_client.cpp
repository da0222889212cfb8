// FleetClient (see fleet_client.h): jobs out to JEs, events in from TEs, one stream per request.
#include "cluster/gateway/fleet_client.h"

#include <algorithm>
#include <future>
#include <limits>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cluster/gateway/fleet_merge.h"
#include "cluster/gateway/fleet_metrics.h"
#include "core/log.h"
#include "sampling/rng.h"

namespace keel::cluster {

using Clock = std::chrono::steady_clock;

FleetClient::FleetClient(FleetClientConfig config) : config_(std::move(config)) {
  if (config_.gateway_id.empty()) {
    config_.gateway_id = "gw-" + std::to_string(sampling::random_seed() % 1000000007ULL);
  }
}

Result<std::unique_ptr<FleetClient>> FleetClient::start(FleetClientConfig config) {
  if (config.je_addresses.empty()) return Status::invalid_argument("gateway: no job executors");
  std::unique_ptr<FleetClient> c(new FleetClient(std::move(config)));
  FleetClient* self = c.get();
  KEEL_ASSIGN_OR_RETURN(c->events_, net::LinkServer::start(c->config_.event_host, 0,
                                                           [self](net::Link&, net::Message m) {
                                                             self->on_event_message(std::move(m));
                                                           }));
  for (const std::string& address : c->config_.je_addresses) {
    KEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<net::Link> je,
        net::Link::connect(
            address, c->config_.connect_timeout,
            [self](net::Link&, net::Message m) { self->on_je_message(std::move(m)); }, nullptr));
    MutexLock lock(c->je_mu_);
    c->jes_.push_back(std::move(je));
    c->je_ids_.emplace_back();
  }
  c->slow_ = std::make_unique<TaskQueue>("gw-slow-submit");
  c->watcher_ = std::thread([self] { self->watch_loop(); });
  if (c->config_.activation_timeout.count() > 0) {
    c->activator_ = std::thread([self] { self->run_activator(); });
  }
  // Limits come from the TEs: wait until one has reported (unless the fleet starts empty).
  if (!c->config_.wait_for_te) {
    c->max_model_len_ = c->config_.max_model_len;
    c->max_waiting_ = c->config_.max_waiting;
    c->fleet_status_async([](const Result<FleetStatus>&) {});  // the first snapshot (/health)
    return c;
  }
  const Clock::time_point deadline = Clock::now() + c->config_.connect_timeout;
  while (true) {
    Result<FleetStatus> fleet = c->fleet_status();
    if (fleet.ok() && fleet->max_model_len > 0) {
      c->max_model_len_ = fleet->max_model_len;
      c->max_waiting_ = fleet->max_waiting;
      break;
    }
    if (Clock::now() > deadline) {
      return Status::unavailable("gateway: no task executor reported within the connect timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return c;
}

FleetClient::~FleetClient() { stop(); }

void FleetClient::stop() {
  std::vector<std::shared_ptr<net::Link>> links;
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  {
    MutexLock lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  const std::vector<std::shared_ptr<net::Link>> jes = je_links();
  links.insert(links.end(), jes.begin(), jes.end());
  {
    MutexLock lock(held_mu_);
    activator_stop_ = true;
  }
  held_cv_.notify_all();
  if (activator_.joinable()) activator_.join();    // it fails whatever is still held
  if (slow_) slow_->stop(/*run_remaining=*/true);  // each fails at once: stopped_ is set
  if (events_) events_->stop();  // the TEs' event links closed, their readers joined
  for (const auto& link : links) link->close();
  // The closed links' readers end the calls still out; their continuations touch this client.
  UniqueLock lock(calls_mu_);
  calls_cv_.wait_for(lock.native(), std::chrono::seconds(10), [&] {
    calls_mu_.assert_held();
    return calls_in_flight_ == 0;
  });
}

size_t FleetClient::num_jobs() const {
  MutexLock lock(mu_);
  return jobs_.size();
}

Result<engine::RequestKey> FleetClient::submit(engine::GenerationRequest request,
                                               std::shared_ptr<engine::OutputSink> sink) {
  std::promise<Result<engine::RequestKey>> placed;
  std::future<Result<engine::RequestKey>> result = placed.get_future();
  submit_async(std::move(request), std::move(sink),
               [&placed](Result<engine::RequestKey> key) { placed.set_value(std::move(key)); });
  return result.get();
}

void FleetClient::submit_async(engine::GenerationRequest request,
                               std::shared_ptr<engine::OutputSink> sink, SubmitDone done) {
  if (!request.retain_as.empty()) {
    return done(Status::invalid_argument(
        "context caches (retain_as) are not available through the cluster gateway"));
  }
  if (request.prompt_tokens.empty()) return done(Status::invalid_argument("empty prompt"));
  const engine::RequestKey key = next_key_.fetch_add(1);
  // Seeded here, so a job submitted again after its JE died samples as its first attempt did.
  if (!request.sampling.seed) request.sampling.seed = sampling::random_seed();
  {
    MutexLock lock(mu_);
    if (draining_ || stopped_) return done(Status::unavailable("gateway is draining"));
    Pending& p = jobs_[key];
    p = Pending{std::move(sink), nullptr, 0, 0};
    p.request = request;
    p.last_event = Clock::now();
  }
  SubmitJob job{JobRef{config_.gateway_id, key}, events_->address(), std::move(request)};
  auto message = std::make_shared<const net::Message>(encode(job));
  submit_once_async(
      key, message, [this, key, message, done = std::move(done)](Status first) mutable {
        if (first.code() != StatusCode::kUnavailable || config_.activation_timeout.count() <= 0) {
          return resolve(key, first, done);
        }
        hold(key, std::move(message), std::move(first), std::move(done));
      });
}

void FleetClient::hold(engine::RequestKey key, std::shared_ptr<const net::Message> message,
                       Status last, SubmitDone done) {
  // The activator: hold the request until a TE is ready (the autoscaler sees it as demand).
  held_.fetch_add(1);
  {
    MutexLock lock(held_mu_);
    held_queue_.push_back(Held{key, std::move(message), Clock::now() + config_.activation_timeout,
                               std::move(last), std::move(done)});
  }
  held_cv_.notify_all();
}

void FleetClient::resolve(engine::RequestKey key, const Status& status, const SubmitDone& done) {
  {
    MutexLock lock(mu_);
    if (!status.ok()) {
      jobs_.erase(key);
    } else if (const auto it = jobs_.find(key); it != jobs_.end()) {
      it->second.placed = true;  // from now on its JE's death makes it an orphan
    }
  }
  if (status.ok()) {
    done(key);
  } else {
    done(status);
  }
}

void FleetClient::expire_held() {
  bool give_up_all = false;
  {
    MutexLock lock(mu_);
    give_up_all = draining_ || stopped_;
  }
  std::vector<Held> expired;
  {
    MutexLock lock(held_mu_);
    give_up_all = give_up_all || activator_stop_;
    const Clock::time_point now = Clock::now();
    // Deadlines grow along the queue (one timeout for all): the expired ones lead it.
    while (!held_queue_.empty() && (give_up_all || held_queue_.front().deadline <= now)) {
      expired.push_back(std::move(held_queue_.front()));
      held_queue_.pop_front();
    }
  }
  const double timeout_s = std::chrono::duration<double>(config_.activation_timeout).count();
  for (Held& h : expired) {
    held_.fetch_sub(1);
    resolve(h.key,
            give_up_all ? Status::unavailable("gateway is draining")
                        : Status::unavailable(fmt::format(
                              "no task executor became ready within the activation timeout "
                              "({:.1f} s): {}",
                              timeout_s, h.last.message())),
            h.done);
  }
}

void FleetClient::run_activator() {
  UniqueLock lock(held_mu_);
  while (true) {
    held_cv_.wait(lock.native(), [this] {
      held_mu_.assert_held();
      return activator_stop_ || !held_queue_.empty();
    });
    lock.unlock();
    expire_held();
    // The oldest first; while it is refused for want of a TE, so would the rest be.
    for (;;) {
      engine::RequestKey key = 0;
      std::shared_ptr<const net::Message> message;
      {
        MutexLock held_lock(held_mu_);
        if (held_queue_.empty()) break;
        key = held_queue_.front().key;
        message = held_queue_.front().message;
      }
      bool aborted = false;
      {
        MutexLock jobs_lock(mu_);
        aborted = jobs_.find(key) == jobs_.end();  // drain() aborted it meanwhile
      }
      const Status s = aborted ? Status::unavailable("the request was aborted while held")
                               : submit_once(key, message);
      UniqueLock held_lock(held_mu_);
      if (s.code() == StatusCode::kUnavailable && !aborted) {
        held_queue_.front().last = s;
        break;
      }
      Held h = std::move(held_queue_.front());  // only this thread pops
      held_queue_.pop_front();
      held_lock.unlock();
      held_.fetch_sub(1);
      resolve(h.key, s, h.done);
    }
    lock.lock();
    if (activator_stop_ && held_queue_.empty()) return;
    held_cv_.wait_for(lock.native(), std::chrono::milliseconds(20), [this] {
      held_mu_.assert_held();
      return activator_stop_;
    });
  }
}

// One submission across the JEs it tries (round robin from where it started).
struct FleetClient::SubmitTry {
  engine::RequestKey key = 0;
  std::shared_ptr<const net::Message> message;
  std::vector<std::shared_ptr<net::Link>> jes;
  size_t start = 0;
  size_t next = 0;  // how many were tried
  Status last = Status::unavailable("no job executor reachable");
  std::function<void(Status)> done;
  std::string request_id;  // for the hop log
  Clock::time_point started = Clock::now();
};

void FleetClient::submit_once_async(engine::RequestKey key,
                                    std::shared_ptr<const net::Message> message,
                                    std::function<void(Status)> done) {
  if (!any_je_up()) {
    // Every JE is down: one is being restarted (fleet_client.h). Waited for off this thread.
    const Clock::time_point deadline = Clock::now() + config_.je_wait;
    auto wait = [this, key, message, done, deadline] {
      if (!await_je_until(deadline)) return done(Status::unavailable("no job executor reachable"));
      submit_now(key, message, done);
    };
    if (!slow_->post(wait)) done(Status::unavailable("gateway is stopping"));
    return;
  }
  submit_now(key, std::move(message), std::move(done));
}

void FleetClient::submit_now(engine::RequestKey key, std::shared_ptr<const net::Message> message,
                             std::function<void(Status)> done) {
  auto t = std::make_shared<SubmitTry>();
  std::string program;  // tenant-scoped
  {
    MutexLock lock(mu_);
    if (const auto it = jobs_.find(key); it != jobs_.end()) {
      t->request_id = it->second.request.request_id;
      if (!it->second.request.program.empty()) {
        program = it->second.request.tenant + '\x1f' + it->second.request.program;
      }
    }
  }
  t->key = key;
  t->message = std::move(message);
  t->jes = je_links();
  // A program's calls start at one JE (the same for every gateway of the cluster: a hash of the
  // program over the same JE list), whose sticky table knows where its KV is pinned; the others
  // round robin.
  t->start = program.empty() ? next_je_.fetch_add(1) : std::hash<std::string>{}(program);
  t->done = std::move(done);
  submit_step(std::move(t));
}

void FleetClient::submit_step(std::shared_ptr<SubmitTry> t) {
  while (t->next < t->jes.size()) {
    std::shared_ptr<net::Link> je = t->jes[(t->start + t->next) % t->jes.size()];
    ++t->next;
    if (je->closed()) continue;
    {
      MutexLock lock(mu_);
      const auto it = jobs_.find(t->key);
      if (it != jobs_.end()) it->second.je = je;
    }
    call_started();
    const net::Message& message = *t->message;
    je->call_async(message, config_.call_timeout, [this, t, je](Result<Json> reply) mutable {
      if (!reply.ok() && je->closed()) {
        // The JE died with the submission out: it may have taken the job and handed it to a
        // TE. Accepted as that JE's orphan — resubmit_orphans() submits it again as a new
        // attempt (the old one's events dropped, aborted by the JE that takes it), or ends it
        // after je_wait.
        KEEL_LOG_INFO(
            "gateway: job {}'s job executor closed during its submission: submitting it "
            "again once a job executor is up",
            t->key);
        t->done(Status::ok_status());
      } else if (!reply.ok()) {
        t->last = reply.status();  // that JE is stuck: the next one
        submit_step(std::move(t));
      } else {
        const Status s = decode_status_body(*reply);
        if (s.ok()) note_hops(*t, *reply);
        t->done(s);
      }
      call_ended();
    });
    return;
  }
  t->done(t->last);
}

Status FleetClient::submit_once(engine::RequestKey key,
                                const std::shared_ptr<const net::Message>& message) {
  if (!await_je()) return Status::unavailable("no job executor reachable");
  std::promise<Status> answered;
  std::future<Status> result = answered.get_future();
  submit_now(key, message, [&answered](Status s) { answered.set_value(std::move(s)); });
  return result.get();
}

void FleetClient::note_hops(const SubmitTry& t, const Json& reply) {
  const double placed = std::chrono::duration<double>(Clock::now() - t.started).count();
  const auto it = reply.find("hops");
  const Json hops = it != reply.end() && it->is_object() ? *it : Json::object();
  hops_.observe(placed, hops);
  if (placed * 1000.0 >= static_cast<double>(config_.slow_placement_log.count())) {
    KEEL_LOG_INFO("gateway: slow placement: {}", describe_hops(t.request_id, placed, hops));
  } else {
    KEEL_LOG_DEBUG("gateway: {}", describe_hops(t.request_id, placed, hops));
  }
}

void FleetClient::call_started() const {
  MutexLock lock(calls_mu_);
  ++calls_in_flight_;
}

void FleetClient::call_ended() const {
  MutexLock lock(calls_mu_);
  if (--calls_in_flight_ == 0) calls_cv_.notify_all();
}

void FleetClient::abort(engine::RequestKey key) {
  std::shared_ptr<net::Link> je;
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(key);
    if (it == jobs_.end()) return;
    je = it->second.je;
  }
  if (je) je->send(encode_abort_job(AbortTask{JobRef{config_.gateway_id, key}, 0}));
  engine::TokenEvent final_event;
  final_event.finish = engine::FinishReason::kAbort;
  finish_locally(key, std::move(final_event));
}

bool FleetClient::finish_locally(engine::RequestKey key, engine::TokenEvent event) {
  MutexLock lock(mu_);
  const auto it = jobs_.find(key);
  if (it == jobs_.end()) return false;
  std::shared_ptr<engine::OutputSink> sink = std::move(it->second.sink);
  jobs_.erase(it);
  sink->on_event(std::move(event));
  return true;
}

void FleetClient::on_event_message(net::Message message) {
  if (message.type != msg::kTaskEvent) return;
  Result<TaskEvent> event = decode_task_event(message.body);
  if (!event.ok()) {
    KEEL_LOG_WARN("gateway: bad task event: {}", event.status().message());
    return;
  }
  deliver(std::move(*event));
}

void FleetClient::deliver(TaskEvent m) {
  MutexLock lock(mu_);
  const auto it = jobs_.find(m.job);
  if (it == jobs_.end()) return;  // finished, aborted, or not ours
  Pending& p = it->second;
  if (m.attempt < p.attempt) return;  // a stale attempt (re-driven elsewhere)
  p.attempt = m.attempt;
  engine::TokenEvent& ev = m.event;
  const int32_t end = m.first_index + static_cast<int32_t>(ev.tokens.size());
  // Tokens the client already has (a re-drive regenerates from what the JE knew) are cut.
  const int64_t skip = int64_t{p.delivered} - m.first_index;
  if (skip > 0) {
    const size_t n = std::min(static_cast<size_t>(skip), ev.tokens.size());
    ev.tokens.erase(ev.tokens.begin(), ev.tokens.begin() + static_cast<std::ptrdiff_t>(n));
    if (ev.logprobs.size() >= n) {
      ev.logprobs.erase(ev.logprobs.begin(), ev.logprobs.begin() + static_cast<std::ptrdiff_t>(n));
    }
  } else if (skip < 0) {
    KEEL_LOG_WARN("gateway: job {} skipped {} tokens (attempt {})", m.job, -skip, m.attempt);
  }
  p.delivered = std::max(p.delivered, end);
  p.tokens.insert(p.tokens.end(), ev.tokens.begin(), ev.tokens.end());  // what the client has
  p.last_event = Clock::now();
  if (ev.tokens.empty() && !ev.finish) return;
  const bool final_event = ev.finish.has_value();
  if (final_event && p.request.keep_kv && p.je) {  // before the sink: it may release at once
    MutexLock kept(kept_mu_);
    if (kept_.insert_or_assign(m.job, p.je).second) kept_order_.push_back(m.job);
    while (kept_order_.size() > kMaxKept) {
      kept_.erase(kept_order_.front());
      kept_order_.pop_front();
    }
  }
  p.sink->on_event(std::move(ev));
  if (final_event) jobs_.erase(it);
}

void FleetClient::release_kv_pin(engine::RequestKey key) {
  std::shared_ptr<net::Link> je;
  {
    MutexLock lock(kept_mu_);
    const auto it = kept_.find(key);
    if (it == kept_.end()) return;
    je = it->second.lock();
    kept_.erase(it);  // its place in kept_order_ goes when it comes to the front
  }
  if (je) je->send(encode_release_kv_job(AbortTask{JobRef{config_.gateway_id, key}, 0}));
}

void FleetClient::on_je_message(net::Message message) {
  if (message.type == msg::kJobAttempt) {
    Result<JobAttempt> a = decode_job_attempt(message.body);
    if (!a.ok()) return;
    MutexLock lock(mu_);
    const auto it = jobs_.find(a->job);
    if (it != jobs_.end()) it->second.attempt = std::max(it->second.attempt, a->attempt);
    return;
  }
  if (message.type == msg::kJobFailed) {
    Result<JobFailed> f = decode_job_failed(message.body);
    if (!f.ok()) return;
    engine::TokenEvent final_event;
    final_event.finish = engine::FinishReason::kError;
    final_event.error = f->error;
    finish_locally(f->job, std::move(final_event));
  }
}

bool FleetClient::release_cache(const std::string&, const std::string&) { return false; }

std::optional<engine::ContextCacheInfo> FleetClient::find_cache(const std::string&,
                                                                const std::string&) const {
  return std::nullopt;
}

std::vector<engine::ContextCacheInfo> FleetClient::list_caches(const std::string&) const {
  return {};
}

void FleetClient::drain(std::chrono::milliseconds timeout) {
  {
    MutexLock lock(mu_);
    draining_ = true;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  while (num_jobs() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<engine::RequestKey> left;
  {
    MutexLock lock(mu_);
    for (const auto& [key, pending] : jobs_) left.push_back(key);
  }
  for (engine::RequestKey key : left) abort(key);
}

Status FleetClient::load_lora(const std::string& name, const std::string& path) {
  (void)path;
  return Status::unsupported("cannot load LoRA adapter '" + name +
                             "': a cluster does not load adapters at run time; name them when it "
                             "starts (keel cluster up --lora NAME=PATH)");
}

Status FleetClient::unload_lora(const std::string& name) {
  return Status::unsupported("cannot unload LoRA adapter '" + name +
                             "': a cluster's adapters are fixed when it starts "
                             "(keel cluster up --lora NAME=PATH)");
}

}  // namespace keel::cluster
