// The fleet as one engine for /metrics: sums of the TEs' counters (EngineStats) and histograms
// (MetricsSnapshot, bucket by bucket when the bounds agree; a TE with other bounds is skipped and
// counted; an MoE model's expert counts summed when their shapes agree). kv_usage is recomputed
// from the summed blocks.
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "engine/types.h"

namespace keel::cluster {

[[nodiscard]] engine::EngineStats merge_stats(const std::vector<engine::EngineStats>& all);
[[nodiscard]] engine::MetricsSnapshot merge_metrics(
    const std::vector<engine::MetricsSnapshot>& all);

}  // namespace keel::cluster
