// FleetClient (see fleet_client.h): jobs out to JEs, events in from TEs, one stream per request.
#include "cluster/fleet_client.h"

#include <algorithm>
#include <future>
#include <limits>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "cluster/fleet_merge.h"
#include "cluster/fleet_metrics.h"
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
  KEEL_ASSIGN_OR_RETURN(
      c->events_, Listener::start(
                      c->config_.event_host, 0,
                      [self](Link&, Message m) { self->on_event_message(std::move(m)); }, nullptr,
                      [self](std::shared_ptr<Link> link) {
                        std::lock_guard lock(self->mu_);
                        std::erase_if(self->te_links_, [](const auto& l) { return l->closed(); });
                        self->te_links_.push_back(std::move(link));
                      }));
  for (const std::string& address : c->config_.je_addresses) {
    KEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<Link> je,
        Link::connect(
            address, c->config_.connect_timeout,
            [self](Link&, Message m) { self->on_je_message(std::move(m)); }, nullptr));
    std::lock_guard lock(c->je_mu_);
    c->jes_.push_back(std::move(je));
    c->je_ids_.emplace_back();
  }
  c->watcher_ = std::thread([self] { self->watch_loop(); });
  if (c->config_.activation_timeout.count() > 0) {
    c->activator_ = std::thread([self] { self->run_activator(); });
  }
  // Limits come from the TEs: wait until one has reported (unless the fleet starts empty).
  if (!c->config_.wait_for_te) {
    c->max_model_len_ = c->config_.max_model_len;
    c->max_waiting_ = c->config_.max_waiting;
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
  std::vector<std::shared_ptr<Link>> links;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    links = te_links_;
  }
  {
    std::lock_guard lock(watch_mu_);
    watch_stop_ = true;
  }
  watch_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  const std::vector<std::shared_ptr<Link>> jes = je_links();
  links.insert(links.end(), jes.begin(), jes.end());
  {
    std::lock_guard lock(held_mu_);
    activator_stop_ = true;
  }
  held_cv_.notify_all();
  if (activator_.joinable()) activator_.join();  // it fails whatever is still held
  if (events_) events_->stop();
  for (const auto& link : links) link->close();
}

size_t FleetClient::num_jobs() const {
  std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    if (draining_ || stopped_) return done(Status::unavailable("gateway is draining"));
    Pending& p = jobs_[key];
    p = Pending{std::move(sink), nullptr, 0, 0};
    p.request = request;
    p.last_event = Clock::now();
  }
  SubmitJob job{JobRef{config_.gateway_id, key}, events_->address(), std::move(request)};
  auto message = std::make_shared<const Message>(encode(job));
  const Status first = submit_once(key, *message);
  if (first.code() != StatusCode::kUnavailable || config_.activation_timeout.count() <= 0) {
    return resolve(key, first, done);
  }
  // The activator: hold the request until a TE is ready (the autoscaler sees it as demand).
  held_.fetch_add(1);
  {
    std::lock_guard lock(held_mu_);
    held_queue_.push_back(Held{key, std::move(message), Clock::now() + config_.activation_timeout,
                               first, std::move(done)});
  }
  held_cv_.notify_all();
}

void FleetClient::resolve(engine::RequestKey key, const Status& status, const SubmitDone& done) {
  {
    std::lock_guard lock(mu_);
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
    std::lock_guard lock(mu_);
    give_up_all = draining_ || stopped_;
  }
  std::vector<Held> expired;
  {
    std::lock_guard lock(held_mu_);
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
  std::unique_lock lock(held_mu_);
  while (true) {
    held_cv_.wait(lock, [this] { return activator_stop_ || !held_queue_.empty(); });
    lock.unlock();
    expire_held();
    // The oldest first; while it is refused for want of a TE, so would the rest be.
    for (;;) {
      engine::RequestKey key = 0;
      std::shared_ptr<const Message> message;
      {
        std::lock_guard held_lock(held_mu_);
        if (held_queue_.empty()) break;
        key = held_queue_.front().key;
        message = held_queue_.front().message;
      }
      bool aborted = false;
      {
        std::lock_guard jobs_lock(mu_);
        aborted = jobs_.find(key) == jobs_.end();  // drain() aborted it meanwhile
      }
      const Status s = aborted ? Status::unavailable("the request was aborted while held")
                               : submit_once(key, *message);
      std::unique_lock held_lock(held_mu_);
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
    held_cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return activator_stop_; });
  }
}

Status FleetClient::submit_once(engine::RequestKey key, const Message& message) {
  Status last = Status::unavailable("no job executor reachable");
  if (!await_je()) return last;  // every JE is down: one is being restarted (fleet_client.h)
  const std::vector<std::shared_ptr<Link>> jes = je_links();
  const size_t start = next_je_.fetch_add(1);
  for (size_t i = 0; i < jes.size(); ++i) {
    const std::shared_ptr<Link>& je = jes[(start + i) % jes.size()];
    if (je->closed()) continue;
    {
      std::lock_guard lock(mu_);
      const auto it = jobs_.find(key);
      if (it != jobs_.end()) it->second.je = je;
    }
    Result<Json> reply = je->call(message, config_.call_timeout);
    if (!reply.ok() && je->closed()) {
      // The JE died with the submission out: it may have taken the job and handed it to a TE.
      // Accepted as that JE's orphan — resubmit_orphans() submits it again as a new attempt (the
      // old one's events dropped, aborted by the JE that takes it), or ends it after je_wait.
      KEEL_LOG_INFO(
          "gateway: job {}'s job executor closed during its submission: submitting it "
          "again once a job executor is up",
          key);
      return Status::ok_status();
    }
    if (!reply.ok()) {
      last = reply.status();
      continue;  // that JE is stuck: the next one
    }
    return decode_status_body(*reply);
  }
  return last;
}

void FleetClient::abort(engine::RequestKey key) {
  std::shared_ptr<Link> je;
  {
    std::lock_guard lock(mu_);
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
  std::lock_guard lock(mu_);
  const auto it = jobs_.find(key);
  if (it == jobs_.end()) return false;
  std::shared_ptr<engine::OutputSink> sink = std::move(it->second.sink);
  jobs_.erase(it);
  sink->on_event(std::move(event));
  return true;
}

void FleetClient::on_event_message(Message message) {
  if (message.type != msg::kTaskEvent) return;
  Result<TaskEvent> event = decode_task_event(message.body);
  if (!event.ok()) {
    KEEL_LOG_WARN("gateway: bad task event: {}", event.status().message());
    return;
  }
  deliver(std::move(*event));
}

void FleetClient::deliver(TaskEvent m) {
  std::lock_guard lock(mu_);
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
  p.sink->on_event(std::move(ev));
  if (final_event) jobs_.erase(it);
}

void FleetClient::on_je_message(Message message) {
  if (message.type == msg::kJobAttempt) {
    Result<JobAttempt> a = decode_job_attempt(message.body);
    if (!a.ok()) return;
    std::lock_guard lock(mu_);
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

Result<FleetStatus> FleetClient::fleet_status() const {
  const std::vector<std::shared_ptr<Link>> jes = je_links();
  std::vector<std::string> ids;
  {
    std::lock_guard lock(je_mu_);
    ids = je_ids_;
  }
  // Every JE at once (one that does not answer costs call_timeout once, not once per JE).
  const auto ask = [this](const std::shared_ptr<Link>& je) -> Result<FleetStatus> {
    if (je->closed()) {
      const Status why = je->close_reason();
      return Status::unavailable(why.ok() ? "link closed (it exited?)" : why.message());
    }
    KEEL_ASSIGN_OR_RETURN(Json reply, je->call(Message{std::string(msg::kFleet), Json::object()},
                                               config_.call_timeout));
    return decode_fleet_status(reply);
  };
  std::vector<std::future<Result<FleetStatus>>> later;
  for (size_t i = 1; i < jes.size(); ++i) {
    later.push_back(std::async(std::launch::async, ask, jes[i]));
  }
  std::vector<JeAnswer> answers;
  for (size_t i = 0; i < jes.size(); ++i) {
    answers.push_back({config_.je_addresses[i], ids[i], i == 0 ? ask(jes[0]) : later[i - 1].get()});
  }
  {
    std::lock_guard lock(je_mu_);
    for (size_t i = 0; i < answers.size() && i < je_ids_.size(); ++i) {
      if (answers[i].status.ok()) je_ids_[i] = answers[i].status->je_id;
    }
  }
  return merge_fleet_statuses(answers);
}

engine::EngineStats FleetClient::stats() const {
  std::lock_guard lock(status_mu_);
  if (!cached_ || Clock::now() - cached_at_ > config_.status_cache) {
    Result<FleetStatus> fleet = fleet_status();
    if (fleet.ok()) {
      cached_ = std::move(*fleet);
      cached_at_ = Clock::now();
    }
  }
  if (!cached_) return {};
  return merge_stats(cached_->stats);
}

engine::MetricsSnapshot FleetClient::metrics() const {
  (void)stats();  // refreshes the cache
  std::lock_guard lock(status_mu_);
  if (!cached_) return {};
  return merge_metrics(cached_->metrics);
}

void FleetClient::drain(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mu_);
    draining_ = true;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  while (num_jobs() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<engine::RequestKey> left;
  {
    std::lock_guard lock(mu_);
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
