// FleetClient's JE failover (see fleet_client.h): the watch thread reconnects a JE whose link
// closed — the cluster manager restarts a dead JE at its address — and submits the jobs it held
// again, resumed from the tokens the client has, to a JE that is up. Until a JE takes a job, its
// TE (which does not depend on the JE to stream) goes on sending events, which are delivered as
// usual; once a JE took it, the old attempt's events are dropped and the new JE aborts it.
#include <algorithm>
#include <utility>

#include "cluster/gateway/fleet_client.h"
#include "core/log.h"

namespace keel::cluster {

std::vector<std::shared_ptr<net::Link>> FleetClient::je_links() const {
  MutexLock lock(je_mu_);
  return jes_;
}

bool FleetClient::any_je_up() const {
  const std::vector<std::shared_ptr<net::Link>> jes = je_links();
  return std::any_of(jes.begin(), jes.end(), [](const auto& je) { return !je->closed(); });
}

bool FleetClient::await_je() const {
  return await_je_until(std::chrono::steady_clock::now() + config_.je_wait);
}

bool FleetClient::await_je_until(std::chrono::steady_clock::time_point deadline) const {
  using Clock = std::chrono::steady_clock;
  while (!any_je_up()) {
    {
      MutexLock lock(mu_);
      if (draining_ || stopped_) return false;
    }
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void FleetClient::watch_loop() {
  UniqueLock lock(watch_mu_);
  while (!watch_stop_) {
    watch_cv_.wait_for(lock.native(), config_.je_watch_interval, [this] {
      watch_mu_.assert_held();
      return watch_stop_;
    });
    if (watch_stop_) return;
    lock.unlock();
    reconnect_lost_jes();
    resubmit_orphans();
    lock.lock();
  }
}

void FleetClient::reconnect_lost_jes() {
  const std::vector<std::shared_ptr<net::Link>> jes = je_links();
  for (size_t i = 0; i < jes.size(); ++i) {
    if (!jes[i]->closed()) continue;
    // A restarted JE listens at the same address; a refused connect costs nothing.
    Result<std::shared_ptr<net::Link>> again = net::Link::connect(
        config_.je_addresses[i], std::chrono::milliseconds(1),
        [this](net::Link&, net::Message m) { on_je_message(std::move(m)); }, nullptr);
    if (!again.ok()) continue;
    KEEL_LOG_INFO("gateway: job executor at {} is back", config_.je_addresses[i]);
    MutexLock lock(je_mu_);
    jes_[i] = std::move(*again);
  }
}

void FleetClient::resubmit_orphans() {
  std::vector<engine::RequestKey> orphans;
  std::vector<engine::RequestKey> expired;
  const auto now = std::chrono::steady_clock::now();
  {
    MutexLock lock(mu_);
    for (const auto& [key, p] : jobs_) {
      if (!p.placed || p.je == nullptr || !p.je->closed()) continue;  // not a JE's, or its is up
      orphans.push_back(key);
      if (now - p.last_event > config_.je_wait) expired.push_back(key);
    }
  }
  if (orphans.empty()) return;
  const std::vector<std::shared_ptr<net::Link>> jes = je_links();
  std::vector<std::shared_ptr<net::Link>> up;
  for (const auto& je : jes) {
    if (!je->closed()) up.push_back(je);
  }
  for (size_t i = 0; i < orphans.size(); ++i) {
    Status s = up.empty() ? Status::unavailable("no job executor is up")
                          : resubmit(orphans[i], up[(next_je_.fetch_add(1)) % up.size()]);
    if (s.ok()) continue;
    const bool waited_out = std::find(expired.begin(), expired.end(), orphans[i]) != expired.end();
    if (s.code() == StatusCode::kUnavailable && !waited_out) continue;  // try again next pass
    engine::TokenEvent final_event;
    final_event.finish = engine::FinishReason::kError;
    final_event.error = "its job executor died and no other took the request: " + s.message();
    finish_locally(orphans[i], std::move(final_event));
  }
}

Status FleetClient::resubmit(engine::RequestKey key, const std::shared_ptr<net::Link>& je) {
  SubmitJob job;
  job.ref = JobRef{config_.gateway_id, key};
  job.reply_to = events_->address();
  std::shared_ptr<net::Link> dead;  // the JE it had, restored should this submission fail
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(key);
    if (it == jobs_.end()) return Status::ok_status();  // it finished meanwhile
    Pending& p = it->second;
    if (!p.placed || p.je == nullptr || !p.je->closed()) return Status::ok_status();
    // From now on the old attempt's events are stale: the client's stream continues from the
    // tokens it has, through the new attempt.
    dead = std::exchange(p.je, je);
    p.attempt += 1;
    job.attempt = p.attempt;
    job.request = p.request;
    const int32_t resumed =
        std::min<int32_t>(static_cast<int32_t>(p.tokens.size()), p.request.max_tokens - 1);
    job.request.prompt_tokens.insert(job.request.prompt_tokens.end(), p.tokens.begin(),
                                     p.tokens.begin() + std::max(resumed, 0));
    job.request.resumed_tokens = std::max(resumed, 0);
  }
  Result<Json> reply = je->call(encode(job), config_.call_timeout);
  const Status s = reply.ok() ? decode_status_body(*reply) : reply.status();
  MutexLock lock(mu_);
  const auto it = jobs_.find(key);
  if (s.ok()) {
    resubmitted_.fetch_add(1);
    KEEL_LOG_INFO(
        "gateway: job {} submitted again (attempt {}, {} tokens resumed) after its "
        "job executor died",
        key, job.attempt, job.request.resumed_tokens);
    // Aborted (or ended) while the call was out: the JE must not run it for nobody.
    if (it == jobs_.end()) je->send(encode_abort_job(AbortTask{job.ref, 0}));
    return s;
  }
  // Still an orphan (its dead JE's link marks it so; the next pass tries again from the tokens
  // the client has then). The old attempt's events stay dropped: some were while the call was
  // out, so taking them again would leave a gap.
  if (it != jobs_.end() && it->second.je == je) it->second.je = dead;
  return s;
}

}  // namespace keel::cluster
