// Health from progress: the rule that turns what a JE knows of a task executor (TE) — its link,
// when it last reported, when its engine's step counter last moved, whether it holds work — into
// one of four states. Liveness is not health: a TE whose process answers but whose engine makes
// no progress on the work it holds is hung, and is treated as dead (its jobs re-driven, the
// process killed and replaced by the cluster manager).
//
//   dead     its control link closed (the process is gone)
//   hung     silent (no report for report_timeout), or it holds work and its step counter has
//            not moved for hang_timeout
//   busy     it holds work and makes progress (however slowly: each engine step counts, so a
//            long chunked prefill under a CPU hog is busy, never hung, while a chunk takes less
//            than hang_timeout)
//   healthy  no work; its step counter is not looked at
//
// Thread safety: pure functions over plain values.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace keel::cluster::health {

enum class TeState { kHealthy, kBusy, kHung, kDead };
[[nodiscard]] std::string_view te_state_name(TeState state);  // "healthy", "busy", "hung", "dead"
[[nodiscard]] std::optional<TeState> parse_te_state(std::string_view name);
// Healthy and busy TEs take work; hung and dead ones do not.
[[nodiscard]] inline bool serving(TeState s) {
  return s == TeState::kHealthy || s == TeState::kBusy;
}

// What the JE knows of one TE at one instant.
struct TeProgressSnapshot {
  bool link_open = true;  // the JE's control link to it is up
  bool reported = false;  // it has sent at least one load report (false: still starting)
  bool has_work = false;  // the JE has jobs on it
  std::chrono::milliseconds since_report{0};    // since its last load report
  std::chrono::milliseconds since_progress{0};  // since its step counter last moved, a token
                                                // was reported, or it was given work
};

struct HealthConfig {
  // Work held and no engine step for this long: hung. Must exceed the longest engine step (one
  // prefill chunk) under load.
  std::chrono::milliseconds hang_timeout{5000};
  // No load report at all for this long: hung (the process holds its link but says nothing: a
  // SIGSTOPped TE). Reports come every report interval (100 ms by default).
  std::chrono::milliseconds report_timeout{5000};
  [[nodiscard]] Status validate() const;
};

[[nodiscard]] TeState classify(const TeProgressSnapshot& te, const HealthConfig& config);

// The state a JE shows for a TE, given the one it showed (`shown`), whether the TE is still in
// service, whether it ever reported, and classify()'s verdict now. In service: the verdict. Out of
// service, a TE keeps the state that took it out — hung stays hung (the JE closes a hung TE's
// link itself, which is no news) — except that one taken out by a failed call shows as dead.
[[nodiscard]] TeState shown_state(TeState shown, bool in_service, bool reported, TeState verdict);

}  // namespace keel::cluster::health
