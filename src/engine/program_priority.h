// Program-aware admission (Autellix's PLAS: Luo et al., "Autellix: An Efficient Serving Engine for
// LLM Agents as General Programs", 2025), as pure step functions over a snapshot. An agent
// program is a chain of calls (a Responses chain, or calls sharing a program id); its attained
// service is the weighted tokens (vtc.h's weights: prompt 1, output 2) every call of it has
// received so far, kept between its calls. Waiting calls are ordered by their program's service,
// discretised into levels (level 0 below `quantum`, then one level per doubling, at most
// `levels`), first come first served within a level, so short programs are not stuck behind long
// ones while a long program's calls keep their order. Anti-starvation: a call is lifted to level 0
// once the engine has served more than `starvation_factor` × (its program's service + quantum)
// tokens to others while it waited (Autellix's wait/service ratio, measured in tokens so the
// policy needs no clock). A call without a program is a program of its own (service 0).
//
// Invariants: a program's service never decreases; the table holds at most `max_programs`
// programs (past it, the least recently charged are forgotten, down to 7/8 of the cap). Thread
// safety: plain values; the Scheduler (engine thread) owns its ProgramServiceTable.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"

namespace keel::engine {

enum class ProgramScheduling { kFcfs, kPlas };

struct ProgramSchedulingConfig {
  ProgramScheduling mode = ProgramScheduling::kPlas;  // --program-scheduling
  double quantum = 512.0;          // weighted tokens of level 0 (Autellix's first queue)
  int32_t levels = 8;              // level of service s: 0 below quantum, 1 + log2(s / quantum)
  double starvation_factor = 6.0;  // lift to level 0 past factor × (service + quantum) served
  int32_t max_programs = 65536;    // programs remembered
  [[nodiscard]] Status validate() const;
};

struct ProgramServiceTable {
  struct Entry {
    double service = 0.0;    // weighted tokens received by every call so far
    uint64_t last_used = 0;  // `clock` at its last charge (for forgetting)
  };
  std::map<std::string, Entry, std::less<>> programs;
  uint64_t clock = 0;   // charges made (orders forgetting)
  double served = 0.0;  // weighted tokens served to all calls (the starvation clock)
};

// One waiting call, in queue order: its program ("" = its own) and `served` when it arrived.
struct WaitingCall {
  std::string_view program;
  double arrived_at = 0.0;  // ProgramServiceTable::served at arrival
};

// The service of `program` (0 for "" or one never seen, or forgotten).
[[nodiscard]] double program_service(const ProgramServiceTable& t, std::string_view program);

// The level of a call whose program has `service`, and `waited` tokens served to others since it
// arrived: 0 when starving.
[[nodiscard]] int32_t program_level(const ProgramSchedulingConfig& c, double service,
                                    double waited);

// Of the waiting calls (queue order), the index of the one to admit next: the lowest level, the
// earliest within it; with kFcfs the first. nullopt when `queue` is empty.
[[nodiscard]] std::optional<size_t> program_pick(const ProgramSchedulingConfig& c,
                                                 const ProgramServiceTable& t,
                                                 std::span<const WaitingCall> queue);

// Service given to a call of `program`: input and output tokens (vtc.h's weights). A call without
// a program advances only the starvation clock.
void program_charge(const ProgramSchedulingConfig& c, ProgramServiceTable* t,
                    std::string_view program, int64_t input_tokens, int64_t output_tokens);

[[nodiscard]] std::string_view program_scheduling_name(ProgramScheduling m);

}  // namespace keel::engine
