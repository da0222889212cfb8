// The PLAS step functions (see program_priority.h).
#include "engine/program_priority.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "engine/vtc.h"

namespace keel::engine {

Status ProgramSchedulingConfig::validate() const {
  if (!(quantum > 0) || !std::isfinite(quantum)) {
    return Status::invalid_argument("program scheduling: quantum must be > 0");
  }
  if (levels < 1 || levels > 64) {
    return Status::invalid_argument("program scheduling: levels must be in [1, 64], got " +
                                    std::to_string(levels));
  }
  if (!(starvation_factor > 0)) {
    return Status::invalid_argument("program scheduling: starvation_factor must be > 0");
  }
  if (max_programs < 1) {
    return Status::invalid_argument("program scheduling: max_programs must be ≥ 1, got " +
                                    std::to_string(max_programs));
  }
  return Status::ok_status();
}

double program_service(const ProgramServiceTable& t, std::string_view program) {
  if (program.empty()) return 0.0;
  const auto it = t.programs.find(program);
  return it == t.programs.end() ? 0.0 : it->second.service;
}

int32_t program_level(const ProgramSchedulingConfig& c, double service, double waited) {
  if (waited > c.starvation_factor * (service + c.quantum)) return 0;
  if (service < c.quantum) return 0;
  const double doublings = std::floor(std::log2(service / c.quantum));
  return static_cast<int32_t>(std::min<double>(1.0 + doublings, c.levels - 1));
}

std::optional<size_t> program_pick(const ProgramSchedulingConfig& c, const ProgramServiceTable& t,
                                   std::span<const WaitingCall> queue) {
  if (queue.empty()) return std::nullopt;
  if (c.mode == ProgramScheduling::kFcfs) return 0;
  size_t best = 0;
  int32_t best_level = c.levels;
  for (size_t i = 0; i < queue.size(); ++i) {
    const double waited = t.served - queue[i].arrived_at;
    const int32_t level = program_level(c, program_service(t, queue[i].program), waited);
    if (level < best_level) {
      best = i;
      best_level = level;
      if (level == 0) break;  // nothing comes before the earliest call of level 0
    }
  }
  return best;
}

namespace {

// Past the cap, forgets the least recently charged programs down to 7/8 of it (at least one), so
// the scan runs once per max_programs / 8 new programs, not for each.
void forget_oldest(const ProgramSchedulingConfig& c, ProgramServiceTable* t) {
  const auto cap = static_cast<size_t>(c.max_programs);
  if (t->programs.size() <= cap) return;
  const size_t keep = cap - cap / 8;
  std::vector<std::pair<uint64_t, std::string_view>> by_age;
  by_age.reserve(t->programs.size());
  for (const auto& [name, e] : t->programs) by_age.emplace_back(e.last_used, name);
  const size_t drop = t->programs.size() - keep;
  std::nth_element(by_age.begin(), by_age.begin() + static_cast<std::ptrdiff_t>(drop - 1),
                   by_age.end());
  std::vector<std::string> gone;
  for (size_t i = 0; i < drop; ++i) gone.emplace_back(by_age[i].second);
  for (const std::string& name : gone) t->programs.erase(name);
}

}  // namespace

void program_charge(const ProgramSchedulingConfig& c, ProgramServiceTable* t,
                    std::string_view program, int64_t input_tokens, int64_t output_tokens) {
  const double amount = kVtcInputWeight * static_cast<double>(input_tokens) +
                        kVtcOutputWeight * static_cast<double>(output_tokens);
  t->served += amount;
  if (program.empty()) return;
  auto it = t->programs.find(program);
  const bool added = it == t->programs.end();
  if (added) it = t->programs.emplace(std::string(program), ProgramServiceTable::Entry{}).first;
  it->second.service += amount;
  it->second.last_used = ++t->clock;
  if (added) forget_oldest(c, t);
}

std::string_view program_scheduling_name(ProgramScheduling m) {
  return m == ProgramScheduling::kPlas ? "plas" : "fcfs";
}

}  // namespace keel::engine
