// SpecEE's two-level layer scheduling: which layers run an exit predictor for the next token.
// Offline level: the top-K layers by exit frequency in a calibration histogram (a run with
// predictors at every layer). Online level: a ring buffer of the last N layers where tokens ended
// early (an exit at the final layer is none); each contributes itself ± radius. Active set =
// offline ∪ online ∪ {final layer}.
//
// Invariants: the final layer (num_layers − 1) is always active (every pass ends there at the
// latest; it needs no predictor); the mask has num_layers entries and matches the ring after every
// record(). Pure data; not thread safe — the engine thread owns one per model.
#pragma once

#include <cstdint>
#include <vector>

#include "core/result.h"
#include "core/status.h"

namespace keel::engine {

struct ExitScheduleConfig {
  int32_t num_layers = 32;    // model depth L
  int32_t offline_top_k = 8;  // layers kept from the calibration ranking (the paper: 8 of 32)
  int32_t history = 5;        // exits remembered by the ring (the paper: 5)
  int32_t radius = 2;         // each remembered exit activates layer ± radius (the paper: 2)

  [[nodiscard]] Status validate() const;
};

// The offline level: layers 0..L−2 ranked by count (ties: the lower layer first), the first
// `top_k` with a count > 0, returned in ascending layer order. The final layer is left out (it is
// always active). `exit_counts` has one count per layer; a shorter or longer one is an error.
[[nodiscard]] Result<std::vector<int32_t>> rank_exit_layers(const std::vector<int64_t>& exit_counts,
                                                            int32_t num_layers, int32_t top_k);

class ExitLayerSchedule {
 public:
  // `offline` must hold distinct layers in [0, num_layers); `cfg` must validate.
  static Result<ExitLayerSchedule> create(const ExitScheduleConfig& cfg,
                                          std::vector<int32_t> offline);

  // The layer where a token's pass ended. An early exit enters the ring (evicting the oldest
  // when full); the final layer is no exit and leaves the ring as it is. Out-of-range layers are
  // a broken invariant of the caller.
  void record(int32_t layer);

  [[nodiscard]] bool active(int32_t layer) const { return mask_[static_cast<size_t>(layer)] != 0; }
  [[nodiscard]] const std::vector<uint8_t>& mask() const { return mask_; }  // [num_layers]
  [[nodiscard]] int32_t num_active() const { return num_active_; }  // includes the final layer
  // Layers that run a predictor: the active ones other than the final layer.
  [[nodiscard]] int32_t num_predictor_layers() const { return num_active_ - 1; }
  // The first active layer ≥ `layer` (the final layer at the latest).
  [[nodiscard]] int32_t next_active(int32_t layer) const;
  [[nodiscard]] const std::vector<int32_t>& offline() const { return offline_; }
  [[nodiscard]] int32_t num_recorded() const { return num_recorded_; }  // early exits so far

 private:
  ExitLayerSchedule(const ExitScheduleConfig& cfg, std::vector<int32_t> offline);
  void rebuild_mask();

  ExitScheduleConfig cfg_;
  std::vector<int32_t> offline_;  // ascending
  std::vector<int32_t> ring_;     // [min(num_recorded, history)] most recent exits
  int32_t ring_next_ = 0;         // where the next record() writes
  int32_t num_recorded_ = 0;
  std::vector<uint8_t> mask_;  // [num_layers]: 1 = active
  int32_t num_active_ = 0;
};

}  // namespace keel::engine
