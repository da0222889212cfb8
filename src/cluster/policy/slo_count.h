// SLO attainment from the engines' latency histograms: how many of the observations two cumulative
// snapshots of one histogram differ by lie within an objective. A histogram knows values only to
// its buckets, so "within" means at or below the largest bucket bound <= the objective — a
// conservative count (an observation between that bound and the objective counts as a miss).
// A snapshot whose count went down (the engine restarted) or whose buckets differ counts from
// zero.
//
// Thread safety: pure functions.
#pragma once

#include "cluster/policy/autoscaler.h"
#include "engine/types.h"

namespace keel::cluster::autoscale {

[[nodiscard]] SloCount count_within(const engine::HistogramSnapshot& before,
                                    const engine::HistogramSnapshot& after, double objective_s);

}  // namespace keel::cluster::autoscale
