// From what the semi-PD engine recorded over a window (SemiPdWindow) to what the split controller
// reads (WindowObservation): the percentile of the TTFT and TPOT samples (empty when there are
// none), the arrival rate λ = arrivals / duration, and l₁ = prefill busy core-seconds / prefills
// completed (so λ′ = λ·l₁). Pure functions: no clock, no engine.
// Invariants: a window with duration ≤ 0 has λ = 0; one with no completed prefill has l₁ = 0
// (λ′ = 0: the TTFT model then has no queueing term); a window in which the split changed is
// reported not stable (the controller does not fit it).
#pragma once

#include <vector>

#include "engine/semi_pd_controller.h"
#include "engine/semi_pd_engine.h"

namespace keel::engine {

// The p-th percentile (p in (0, 100]) of `samples`, linearly interpolated between the closest
// ranks of the sorted samples; empty when there are no samples.
[[nodiscard]] std::optional<double> sample_percentile(std::vector<double> samples, double p);

// The controller's observation of window `w` at percentile `p`.
[[nodiscard]] WindowObservation window_observation(const SemiPdWindow& w, double p);

}  // namespace keel::engine
