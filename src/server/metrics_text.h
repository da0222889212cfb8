// Prometheus text exposition (format 0.0.4) of the engine's state and request metrics, with
// vLLM's metric names under a `keel:` prefix and a `model_name` label on every sample, so vLLM
// dashboards carry over. Counters end in `_total`; histograms expose cumulative `_bucket{le=...}`
// (ending with le="+Inf"), `_sum` and `_count`.
//
// Thread safety: a pure function over snapshots.
#pragma once

#include <string>
#include <string_view>

#include "engine/types.h"

namespace keel::server {

// Content-Type of the exposition.
inline constexpr std::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

std::string render_metrics(const engine::EngineStats& stats, const engine::MetricsSnapshot& metrics,
                           std::string_view model_name);

}  // namespace keel::server
