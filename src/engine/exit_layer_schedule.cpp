// SpecEE's two-level layer scheduling: the offline ranking and the online ring.
#include "engine/exit_layer_schedule.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>

#include "core/check.h"

namespace keel::engine {

Status ExitScheduleConfig::validate() const {
  if (num_layers < 1) return Status::invalid_argument("exit schedule: num_layers must be ≥ 1");
  if (offline_top_k < 0) return Status::invalid_argument("exit schedule: top-K must be ≥ 0");
  if (history < 0) return Status::invalid_argument("exit schedule: history must be ≥ 0");
  if (radius < 0) return Status::invalid_argument("exit schedule: radius must be ≥ 0");
  return {};
}

Result<std::vector<int32_t>> rank_exit_layers(const std::vector<int64_t>& exit_counts,
                                              int32_t num_layers, int32_t top_k) {
  if (num_layers < 1 || static_cast<int64_t>(exit_counts.size()) != num_layers) {
    return Status::invalid_argument("exit histogram has " + std::to_string(exit_counts.size()) +
                                    " layers, the model " + std::to_string(num_layers));
  }
  if (top_k < 0) return Status::invalid_argument("exit schedule: top-K must be ≥ 0");
  for (int64_t c : exit_counts) {
    if (c < 0) return Status::invalid_argument("exit histogram has a negative count");
  }
  std::vector<int32_t> order(static_cast<size_t>(num_layers - 1));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return exit_counts[static_cast<size_t>(a)] > exit_counts[static_cast<size_t>(b)];
  });
  std::vector<int32_t> kept;
  for (int32_t layer : order) {
    if (static_cast<int32_t>(kept.size()) == top_k) break;
    if (exit_counts[static_cast<size_t>(layer)] == 0) break;  // sorted: the rest are 0 too
    kept.push_back(layer);
  }
  std::sort(kept.begin(), kept.end());
  return kept;
}

Result<ExitLayerSchedule> ExitLayerSchedule::create(const ExitScheduleConfig& cfg,
                                                    std::vector<int32_t> offline) {
  KEEL_TRY(cfg.validate());
  std::sort(offline.begin(), offline.end());
  for (size_t i = 0; i < offline.size(); ++i) {
    if (offline[i] < 0 || offline[i] >= cfg.num_layers) {
      return Status::invalid_argument("exit schedule: offline layer " + std::to_string(offline[i]) +
                                      " is outside [0, " + std::to_string(cfg.num_layers) + ")");
    }
    if (i > 0 && offline[i] == offline[i - 1]) {
      return Status::invalid_argument("exit schedule: offline layer " + std::to_string(offline[i]) +
                                      " is listed twice");
    }
  }
  return ExitLayerSchedule(cfg, std::move(offline));
}

ExitLayerSchedule::ExitLayerSchedule(const ExitScheduleConfig& cfg, std::vector<int32_t> offline)
    : cfg_(cfg), offline_(std::move(offline)), mask_(static_cast<size_t>(cfg.num_layers), 0) {
  ring_.reserve(static_cast<size_t>(cfg.history));
  rebuild_mask();
}

void ExitLayerSchedule::record(int32_t layer) {
  KEEL_CHECK(layer >= 0 && layer < cfg_.num_layers);
  if (layer == cfg_.num_layers - 1) return;
  ++num_recorded_;
  if (cfg_.history == 0) return;
  if (static_cast<int32_t>(ring_.size()) < cfg_.history) {
    ring_.push_back(layer);
  } else {
    ring_[static_cast<size_t>(ring_next_)] = layer;
  }
  ring_next_ = (ring_next_ + 1) % cfg_.history;
  rebuild_mask();
}

void ExitLayerSchedule::rebuild_mask() {
  std::fill(mask_.begin(), mask_.end(), 0);
  for (int32_t layer : offline_) mask_[static_cast<size_t>(layer)] = 1;
  for (int32_t exit : ring_) {
    const int32_t lo = std::max(0, exit - cfg_.radius);
    const int32_t hi = std::min(cfg_.num_layers - 1, exit + cfg_.radius);
    for (int32_t l = lo; l <= hi; ++l) mask_[static_cast<size_t>(l)] = 1;
  }
  mask_[static_cast<size_t>(cfg_.num_layers - 1)] = 1;
  num_active_ = static_cast<int32_t>(std::count(mask_.begin(), mask_.end(), 1));
}

int32_t ExitLayerSchedule::next_active(int32_t layer) const {
  KEEL_CHECK(layer >= 0 && layer < cfg_.num_layers);
  while (mask_[static_cast<size_t>(layer)] == 0) ++layer;  // the final layer is always active
  return layer;
}

}  // namespace keel::engine
