// SemiPdWindow → WindowObservation (see semi_pd_window_stats.h).
#include "engine/semi_pd_window_stats.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace keel::engine {

std::optional<double> sample_percentile(std::vector<double> samples, double p) {
  if (samples.empty()) return std::nullopt;
  std::sort(samples.begin(), samples.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(samples.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, samples.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

WindowObservation window_observation(const SemiPdWindow& w, double p) {
  WindowObservation o;
  o.x = w.split.prefill;
  o.y = w.split.decode;
  o.split_stable = !w.split_changed;
  o.ttft_s = sample_percentile(w.ttft_seconds, p);
  o.tpot_s = sample_percentile(w.tpot_seconds, p);
  o.arrival_rate = w.duration_s > 0 ? static_cast<double>(w.num_arrivals) / w.duration_s : 0.0;
  o.prefill_core_s =
      w.num_prefills > 0 ? w.prefill_busy_core_s / static_cast<double>(w.num_prefills) : 0.0;
  return o;
}

}  // namespace keel::engine
