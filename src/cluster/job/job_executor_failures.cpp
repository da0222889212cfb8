// JobExecutor's failure handling (see job_executor.h): the monitor loop, TE health from progress
// (cluster/health/te_health.h: a hung or dead TE is taken out of service and its jobs are
// re-driven), re-drives as new attempts, and failing a job after max_attempts.
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "cluster/health/te_health.h"
#include "cluster/job/job_executor.h"
#include "cluster/job/job_executor_entries.h"
#include "core/log.h"

namespace keel::cluster {

void JobExecutor::monitor_loop() {
  UniqueLock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock.native(), std::chrono::milliseconds(20), [&] {
      mu_.assert_held();  // a wait's predicate runs under its lock
      return stopping_;
    });
    if (stopping_) return;
    lock.unlock();
    check_health();
    subscribe_kv_events();
    lock.lock();
    std::vector<JobRef> redrives, decodes;
    redrives.swap(to_redrive_);
    decodes.swap(to_decode_);
    lock.unlock();
    for (const JobRef& ref : decodes) dispatch_decode(ref);
    for (const JobRef& ref : redrives) redrive(ref);
    retry_parked();
    pump();
    lock.lock();
  }
}

void JobExecutor::check_health() {
  std::vector<std::pair<std::shared_ptr<net::Link>, AbortTask>> aborts;
  std::vector<std::shared_ptr<net::Link>> to_close;
  {
    MutexLock lock(mu_);
    const Clock::time_point now = Clock::now();
    std::vector<int64_t> jobs_on(tes_.size(), 0);  // one pass over the jobs, not one per TE
    for (const auto& [ref, job] : jobs_) {
      if (job->te) ++jobs_on[*job->te];
    }
    health::HealthConfig hc;
    hc.hang_timeout = hc.report_timeout = config_.stall_timeout;
    const auto ms = [](Clock::duration d) {
      return std::chrono::duration_cast<std::chrono::milliseconds>(d);
    };
    for (size_t i = 0; i < tes_.size(); ++i) {
      TeEntry& te = *tes_[i];
      const bool has_jobs = jobs_on[i] > 0;
      if (!has_jobs) te.last_progress = now;  // an idle TE owes no progress
      const health::TeState state =
          health::classify({!(te.link && te.link->closed()), te.reported, has_jobs,
                            ms(now - te.last_report), ms(now - te.last_progress)},
                           hc);
      te.info.state = health::shown_state(te.info.state, te.info.healthy, te.reported, state);
      const bool down = !health::serving(state);
      if (!down && te.info.healthy) continue;
      if (down && te.info.healthy && te.draining) {  // removed by the autoscaler, then stopped
        KEEL_LOG_INFO("je {}: te {} ({}) drained and gone: {}", config_.id, te.info.id, te.address,
                      health::te_state_name(state));
        to_close.push_back(te.link);
      } else if (down && te.info.healthy) {
        KEEL_LOG_WARN(
            "je {}: te {} ({}) counted {}: last report {} ms ago, no progress for {} ms{}",
            config_.id, te.info.id, te.address, health::te_state_name(state),
            ms(now - te.last_report).count(), ms(now - te.last_progress).count(),
            has_jobs ? " with work" : "");
        to_close.push_back(te.link);
      }
      te.info.healthy = false;
      if (!te.reported && !down) continue;  // not up yet
      for (auto& [ref, job] : jobs_) {
        if (job->te != i) continue;
        job->te.reset();
        aborts.emplace_back(te.link, AbortTask{ref, job->attempt});
        if (!job->aborted) to_redrive_.push_back(ref);
      }
      std::erase_if(jobs_, [](const auto& j) { return !j.second->te && j.second->aborted; });
    }
  }
  // A hung TE that wakes up must not keep computing work that moved elsewhere.
  for (auto& [link, abort] : aborts) link->send(encode_abort_task(abort));
  for (auto& link : to_close) link->close();
}

void JobExecutor::redrive(const JobRef& ref) {
  std::shared_ptr<net::Link> gateway;
  int32_t attempt = 0;
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(ref);
    if (it == jobs_.end()) return;
    Job& job = *it->second;
    job.attempt += 1;
    attempt = job.attempt;
    gateway = job.gateway;
    ++jobs_redriven_;
    if (attempt >= config_.max_attempts) {
      gateway = nullptr;
    }
  }
  if (gateway == nullptr) {
    return fail_job(ref, "request failed on " + std::to_string(attempt) + " task executors");
  }
  // The gateway drops events of older attempts from now on.
  gateway->send(encode(JobAttempt{ref.job, attempt}));
  KEEL_LOG_INFO("je {}: re-driving job {}/{} (attempt {})", config_.id, ref.gateway, ref.job,
                attempt);
  const Status s = dispatch(ref);
  if (s.ok()) return;
  if (s.code() != StatusCode::kUnavailable) return fail_job(ref, "re-drive failed: " + s.message());
  // No TE can take it now (the only one of its role died; a replacement is starting): it waits,
  // retried from this loop, up to redrive_wait.
  KEEL_LOG_INFO("je {}: job {}/{} waits for a task executor (up to {} ms): {}", config_.id,
                ref.gateway, ref.job, config_.redrive_wait.count(), s.message());
  MutexLock lock(mu_);
  parked_.emplace(ref, Clock::now() + config_.redrive_wait);
}

void JobExecutor::retry_parked() {
  std::vector<std::pair<JobRef, bool>> due;  // (job, past its deadline)
  {
    MutexLock lock(mu_);
    const Clock::time_point now = Clock::now();
    for (auto it = parked_.begin(); it != parked_.end();) {
      const auto job = jobs_.find(it->first);
      if (job == jobs_.end() || job->second->aborted) {
        if (job != jobs_.end()) jobs_.erase(job);  // aborted while it waited: nothing runs it
        it = parked_.erase(it);
        continue;
      }
      due.emplace_back(it->first, now >= it->second);
      ++it;
    }
  }
  for (const auto& [ref, expired] : due) {
    const Status s = dispatch(ref, /*retry=*/true);
    if (s.ok() || s.code() != StatusCode::kUnavailable || expired) {
      {
        MutexLock lock(mu_);
        parked_.erase(ref);
      }
      if (!s.ok()) {
        fail_job(ref, "re-drive failed: " + s.message() + " (waited " +
                          std::to_string(config_.redrive_wait.count()) + " ms for one)");
      }
    }
  }
}

void JobExecutor::fail_job(const JobRef& ref, const std::string& error) {
  std::shared_ptr<net::Link> gateway;
  {
    MutexLock lock(mu_);
    const auto it = jobs_.find(ref);
    if (it == jobs_.end()) return;
    gateway = it->second->gateway;
    jobs_.erase(it);
    ++jobs_failed_;
  }
  KEEL_LOG_WARN("je {}: job {}/{} failed: {}", config_.id, ref.gateway, ref.job, error);
  gateway->send(encode(JobFailed{ref.job, error}));
}

}  // namespace keel::cluster
