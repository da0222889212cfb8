// The scheduler's admission order (see scheduler.h's policy): fair admission among tenants
// (vtc.h), then program-aware admission within the chosen tenant (program_priority.h), and the
// charges that feed both.
#include <algorithm>
#include <vector>

#include "engine/scheduler.h"

namespace keel::engine {

std::vector<std::string_view> Scheduler::waiting_tenants() const {
  std::vector<std::string_view> tenants;
  tenants.reserve(waiting_.size());
  for (RequestKey key : waiting_) tenants.push_back(requests_.at(key)->tenant);
  return tenants;
}

bool Scheduler::tenant_waiting(std::string_view tenant) const {
  return std::any_of(waiting_.begin(), waiting_.end(),
                     [&](RequestKey key) { return requests_.at(key)->tenant == tenant; });
}

void Scheduler::promote_pick() {
  if (waiting_.size() < 2 || state(waiting_.front()).preempted) return;
  const std::vector<std::string_view> tenants = waiting_tenants();
  const std::optional<size_t> vtc = vtc_pick(vtc_, tenants);
  if (!vtc) return;
  // Program-aware admission among the chosen tenant's waiting requests (queue order).
  std::vector<size_t> index;
  std::vector<WaitingCall> calls;
  for (size_t i = *vtc; i < waiting_.size(); ++i) {
    if (tenants[i] != tenants[*vtc]) continue;
    const RequestState& r = *requests_.at(waiting_[i]);
    index.push_back(i);
    calls.push_back({r.program, r.arrived_at});
  }
  const std::optional<size_t> pick = program_pick(config_.programs, programs_, calls);
  const size_t at = pick ? index[*pick] : *vtc;
  if (at == 0) return;
  const RequestKey key = waiting_[at];
  waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(at));
  waiting_.push_front(key);
}

void Scheduler::charge_admitted(RequestState& r) {
  if (!r.vtc_charged) {
    r.vtc_charged = true;
    vtc_charge(&vtc_, r.tenant, r.tenant_weight, r.num_prompt_tokens, 0);
    program_charge(config_.programs, &programs_, r.program,
                   r.num_prompt_tokens - r.num_cached_tokens, 0);
  }
  if (!tenant_waiting(r.tenant)) vtc_drained(&vtc_, r.tenant);
}

}  // namespace keel::engine
