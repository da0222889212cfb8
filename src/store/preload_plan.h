// The store's preload forecast as a step function: each model's request rate, smoothed by an EWMA,
// decides which models' entries to hold in the store within its memory budget —
// plan_preloads(snapshot) → actions, no I/O (the cluster manager applies the actions through
// ModelStore). Rule: models are ranked by forecast rate (ties: already resident first, then by
// name); the ranked models whose rate is at least `min_rate` are wanted while they fit in the
// budget; a wanted model not resident is preloaded; a resident model that is not wanted is evicted
// only when its bytes are needed for a wanted preload (lowest rate first). Evictions come before
// the preloads they make room for.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace keel::store {

// The EWMA of a rate: `previous` moved towards `observed` (requests per second over the last
// `dt_s` seconds) by 1 - 2^(-dt_s / half_life_s).
[[nodiscard]] double ewma_rate(double previous, double observed, double dt_s, double half_life_s);

struct ModelDemand {
  std::string model;      // the model's name or path (what a preload names)
  uint64_t bytes = 0;     // its entry's size (or the source file's, before one exists)
  double rate = 0.0;      // forecast requests per second (the EWMA)
  bool resident = false;  // it has an entry in the store now
};

struct PreloadSnapshot {
  std::vector<ModelDemand> models;
  // The bytes the forecast may fill. 0: no budget was set, and the forecast does nothing — it
  // neither preloads nor evicts (ModelStore's 0 means unlimited; the forecast needs a bound).
  uint64_t budget_bytes = 0;
  double min_rate = 0.05;  // models forecast below this are not worth preloading
};

enum class PreloadActionKind { kEvict, kPreload };

struct PreloadAction {
  PreloadActionKind kind = PreloadActionKind::kPreload;
  std::string model;
  friend bool operator==(const PreloadAction&, const PreloadAction&) = default;
};

[[nodiscard]] std::vector<PreloadAction> plan_preloads(const PreloadSnapshot& snapshot);

}  // namespace keel::store
