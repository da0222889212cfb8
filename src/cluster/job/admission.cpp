// AdmissionQueue; see admission.h.
#include "cluster/job/admission.h"

#include <algorithm>
#include <limits>

namespace keel::cluster {

double AdmissionQueue::weight(const std::string& tenant) const {
  const auto it = config_.tenant_weights.find(tenant);
  return it != config_.tenant_weights.end() && it->second > 0 ? it->second : 1.0;
}

bool AdmissionQueue::backlogged(const std::string& tenant) const {
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [&](const Held& h) { return h.job.tenant == tenant; });
}

bool AdmissionQueue::holds(const JobRef& ref) const {
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [&](const Held& h) { return h.job.ref == ref; });
}

double AdmissionQueue::counter(const std::string& tenant) const {
  const auto it = counters_.find(tenant);
  return it != counters_.end() ? it->second : 0.0;
}

bool AdmissionQueue::push(WaitingJob job) {
  if (holds(job.ref)) return false;
  if (!backlogged(job.tenant)) {  // VTC's lift: no credit for the time it had nothing waiting
    double lowest = std::numeric_limits<double>::infinity();
    for (const Held& h : waiting_) lowest = std::min(lowest, counter(h.job.tenant));
    double& c = counters_[job.tenant];
    if (lowest != std::numeric_limits<double>::infinity()) c = std::max(c, lowest);
  }
  waiting_.push_back({std::move(job), next_seq_++, programs_.served});
  return true;
}

bool AdmissionQueue::before(const Held& a, const Held& b) const {
  if (a.job.work_class != b.job.work_class) return a.job.work_class < b.job.work_class;
  if (a.job.priority != b.job.priority) return a.job.priority < b.job.priority;
  if (a.job.tenant != b.job.tenant) {
    const double ca = counter(a.job.tenant), cb = counter(b.job.tenant);
    if (ca != cb) return ca < cb;
  }
  if (config_.programs.mode == engine::ProgramScheduling::kPlas) {
    const int32_t la = program_level(a), lb = program_level(b);
    if (la != lb) return la < lb;
  }
  return a.seq < b.seq;
}

int32_t AdmissionQueue::program_level(const Held& h) const {
  return engine::program_level(config_.programs, program_service(h.job.program),
                               programs_.served - h.arrived_at);
}

double AdmissionQueue::program_service(const std::string& program) const {
  return engine::program_service(programs_, program);
}

std::optional<WaitingJob> AdmissionQueue::pop() {
  if (waiting_.empty()) return std::nullopt;
  const auto it = std::min_element(waiting_.begin(), waiting_.end(),
                                   [this](const Held& a, const Held& b) { return before(a, b); });
  WaitingJob job = std::move(it->job);
  waiting_.erase(it);
  counters_[job.tenant] +=
      config_.w_in * static_cast<double>(job.prompt_tokens) / weight(job.tenant);
  engine::program_charge(config_.programs, &programs_, job.program, job.prompt_tokens, 0);
  return job;
}

bool AdmissionQueue::remove(const JobRef& ref) {
  const auto it = std::find_if(waiting_.begin(), waiting_.end(),
                               [&](const Held& h) { return h.job.ref == ref; });
  if (it == waiting_.end()) return false;
  waiting_.erase(it);
  return true;
}

void AdmissionQueue::charge_generated(const std::string& tenant, int64_t tokens,
                                      const std::string& program) {
  if (tokens <= 0) return;
  counters_[tenant] += config_.w_out * static_cast<double>(tokens) / weight(tenant);
  engine::program_charge(config_.programs, &programs_, program, 0, tokens);
}

std::vector<int64_t> AdmissionQueue::waiting_per_class() const {
  std::vector<int64_t> out(static_cast<size_t>(engine::WorkClass::kTraining) + 1, 0);
  for (const Held& h : waiting_) ++out[static_cast<size_t>(h.job.work_class)];
  return out;
}

}  // namespace keel::cluster
