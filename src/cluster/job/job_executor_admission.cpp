// JobExecutor's admission (see job_executor.h and admission.h): jobs held while the fleet runs
// max_jobs_per_te per serving TE, let in by the admission queue's order as jobs end (the monitor
// thread pumps, woken when a job ends), each then dispatched as any job; a held job past
// admission_wait fails, as does one aborted while held (dropped).
#include <utility>
#include <vector>

#include "cluster/job/job_executor.h"
#include "cluster/job/job_executor_entries.h"
#include "core/log.h"

namespace keel::cluster {

bool JobExecutor::hold_locked(const Job& job) {
  if (config_.max_jobs_per_te <= 0) return false;
  WaitingJob w;
  w.ref = job.ref;
  w.work_class = job.request.work_class;
  w.priority = job.request.priority;
  w.prompt_tokens = static_cast<int64_t>(job.request.prompt_tokens.size());
  w.tenant = job.request.tenant;
  w.program = job.request.program;
  if (!admission_.push(std::move(w))) return false;
  held_until_[job.ref] = Clock::now() + config_.admission_wait;
  ++jobs_held_total_;
  return true;
}

int64_t JobExecutor::admission_capacity_locked() const {
  int64_t serving = 0;
  for (const auto& te : tes_) {
    if (te->reported && te->info.healthy && !te->draining && !te->forgotten) ++serving;
  }
  return serving * config_.max_jobs_per_te;
}

void JobExecutor::pump() {
  std::vector<JobRef> admitted, expired;
  {
    MutexLock lock(mu_);
    if (admission_.empty()) return;
    const Clock::time_point now = Clock::now();
    for (const auto& [ref, deadline] : held_until_) {
      if (now >= deadline) expired.push_back(ref);
    }
    for (const JobRef& ref : expired) {
      admission_.remove(ref);
      held_until_.erase(ref);
    }
    int64_t running = static_cast<int64_t>(jobs_.size() - admission_.size() - expired.size());
    const int64_t capacity = admission_capacity_locked();
    while (running < capacity) {
      std::optional<WaitingJob> next = admission_.pop();
      if (!next) break;
      held_until_.erase(next->ref);
      admitted.push_back(next->ref);
      ++running;
    }
  }
  for (const JobRef& ref : expired) {
    fail_job(ref, "no task executor took the job within " +
                      std::to_string(config_.admission_wait.count()) + " ms (admission)");
  }
  for (const JobRef& ref : admitted) {
    dispatch_async(ref, /*retry=*/false, [this, ref](Status s, Json /*hops*/) {
      if (s.ok()) return;
      if (s.code() == StatusCode::kUnavailable) {  // no TE took it after all: wait as a re-drive
        MutexLock lock(mu_);
        parked_.emplace(ref, Clock::now() + config_.redrive_wait);
        return;
      }
      fail_job(ref, s.message());
    });
  }
}

}  // namespace keel::cluster
