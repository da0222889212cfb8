// semi-PD's SLO-aware split controller (the paper's Algorithm 1): once per window of iterations it
// refits TTFT = a₁/(x − λ′) + b₁ and TPOT = a₂/y + b₂ by least squares over the (split, percentile
// latency) points of recent windows, and grows the side that misses its SLO by `step` cores until
// the model says it meets it or `max_step` steps are taken. x = prefill cores, y = decode cores.
// TTFT is checked first, as in the listing (a window missing both grows x; the paper's prose keeps
// the split then); a side shrinks only as the donor under a bounded x + y, never on its own.
//
// λ′ (the M/M/1 term): a worker with x cores serves a prefill in l₁/x seconds, l₁ being the
// core-seconds one prefill needs; with arrivals at λ per second the queue is stable only for
// x > λ′ = λ·l₁, the cores the offered prefill load keeps busy. The engine reports λ and l₁.
//
// Pure: `decide()` reads plain structs and returns the next state; no clocks, no I/O. Not thread
// safe; the engine thread owns a `SemiPdController` and calls `on_window()` once per window.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace keel::engine {

struct ControllerConfig {
  double ttft_slo_s = 1.0;         // S_p for TTFT: the percentile-p TTFT must be ≤ this (seconds)
  double tpot_slo_s = 0.1;         // S_p for TPOT (seconds per output token)
  double percentile = 90;          // p, in (0, 100]: which percentile the engine reports per window
  int32_t window_iterations = 64;  // engine iterations per window (the engine counts them)
  int32_t step = 1;                // cores added per step
  int32_t max_step = 4;    // the most steps one decision takes (growth ≤ step · max_step)
  int32_t min_cores = 1;   // each side keeps at least this many cores
  int32_t max_cores = 16;  // each side holds at most this many cores
  // Bound on x + y; 0 = unbounded (the sets may overlap, as MPS lets x + y exceed 100 %).
  // Bounded: the grown side takes the cores it lacks from the other side, which gives only while
  // it does not miss its own SLO now, keeps min_cores, and its model predicts it still meets its
  // SLO with `headroom` (without a usable fit: nothing, or one step under probe_unfitted when its
  // observed latency has that headroom).
  int32_t max_total_cores = 0;
  // Points the fits use: the latest windows, but a full history drops the oldest point of a split
  // that has a newer one, so each split seen keeps its latest point.
  int32_t history_windows = 16;
  // Hysteresis: a side misses when its observed latency > SLO, but growth stops only once the
  // model predicts ≤ (1 − headroom) · SLO; a donor gives cores under the same margin.
  double headroom = 0.1;
  int32_t cooldown_windows = 1;  // windows after a change that only record points
  // With fewer than two distinct splits to fit, a missing side grows by one `step` to get a
  // second point instead of keeping the split (off: keep it, as Algorithm 1 has no model then).
  bool probe_unfitted = false;

  [[nodiscard]] Status validate() const;
};

// One (split, latency) point of a past window.
struct SplitPoint {
  int32_t x = 0, y = 0;
  double lambda_prime = 0;       // λ′ of that window (cores)
  std::optional<double> ttft_s;  // percentile TTFT; empty when no prefill finished
  std::optional<double> tpot_s;  // percentile TPOT; empty when no decode ran
};

// What the engine measured over the last window.
struct WindowObservation {
  int32_t x = 0, y = 0;          // the split in effect during the window
  bool split_stable = true;      // false when a re-split took effect inside it: not fitted
  std::optional<double> ttft_s;  // percentile-p TTFT of requests whose first token came in it
  std::optional<double> tpot_s;  // percentile-p TPOT of tokens decoded in it
  double arrival_rate = 0;       // λ: requests arrived per second in the window
  double prefill_core_s = 0;     // l₁: core-seconds of prefill per request (busy · cores / n)
};

// State the controller carries from window to window.
struct ControllerState {
  int32_t x = 1, y = 1;             // the current split
  std::vector<SplitPoint> history;  // oldest first, at most history_windows points (see config)
  int32_t cooldown_left = 0;        // windows left before the next change may be made
};

// latency ≈ a·u + b, with u = 1/(x − λ′) for TTFT and u = 1/y for TPOT: least squares under
// b ≥ 0 (an unconstrained b < 0 puts the optimum on b = 0). Unusable with fewer than two distinct
// splits (x for TTFT, y for TPOT) or with a ≤ 0 (more cores would not lower the latency).
struct LatencyFit {
  double a = 0, b = 0;
  int32_t num_points = 0;     // points used
  std::string degenerate;     // why the fit may not be used; empty when usable
  bool lacks_points = false;  // unusable for want of two distinct splits (not its coefficients)
  [[nodiscard]] bool usable() const { return degenerate.empty(); }
};

enum class DecisionReason {
  kBothMet,        // no side misses: keep
  kCooldown,       // a recent change is still settling: keep
  kGrewPrefill,    // TTFT missed: x grew
  kGrewDecode,     // TPOT missed (TTFT met): y grew
  kProbePrefill,   // TTFT missed, too few points to fit: x grew one step (probe_unfitted)
  kProbeDecode,    // TPOT missed, too few points to fit: y grew one step (probe_unfitted)
  kFitDegenerate,  // the missing side's fit is unusable: keep
  kNoRoom,         // the missing side is at max_cores, or no donor core may be taken: keep
};
std::string_view decision_reason_name(DecisionReason r);

struct Decision {
  int32_t x = 0, y = 0;  // the split to apply (the current one when kept)
  bool changed = false;  // (x, y) differs from the current split
  DecisionReason reason = DecisionReason::kBothMet;
  std::string detail;                      // one line for the log and /metrics
  std::optional<double> predicted_ttft_s;  // the models at (x, y); empty without a usable fit
  std::optional<double> predicted_tpot_s;
  LatencyFit ttft_fit, tpot_fit;
  ControllerState next;  // the state to carry into the next window
};

// λ′ = λ · l₁ (cores).
[[nodiscard]] double lambda_prime(double arrival_rate, double prefill_core_s);

// Least squares of latency = a/(x − λ′) + b over the points with a TTFT and x > λ′.
[[nodiscard]] LatencyFit fit_ttft(const std::vector<SplitPoint>& points);
// Least squares of latency = a/y + b over the points with a TPOT.
[[nodiscard]] LatencyFit fit_tpot(const std::vector<SplitPoint>& points);
// The fitted models; empty when the fit is unusable or x ≤ λ′ (the queue grows without bound).
[[nodiscard]] std::optional<double> predict_ttft(const LatencyFit& f, int32_t x, double lambda_p);
[[nodiscard]] std::optional<double> predict_tpot(const LatencyFit& f, int32_t y);

// One window: record the observation, refit, and choose the next split. `cfg` must validate.
[[nodiscard]] Decision decide(const ControllerState& state, const WindowObservation& obs,
                              const ControllerConfig& cfg);

// The engine's handle: owns the state, one call per window, then apply (x, y) when changed.
//   Decision d = controller.on_window(obs);
//   if (d.changed) executor.resplit(d.x, d.y);
class SemiPdController {
 public:
  // `cfg` must validate; the initial split is clamped to [min_cores, max_cores].
  SemiPdController(ControllerConfig cfg, int32_t x, int32_t y);
  Decision on_window(const WindowObservation& obs);
  [[nodiscard]] const ControllerState& state() const { return state_; }
  [[nodiscard]] const ControllerConfig& config() const { return cfg_; }

 private:
  ControllerConfig cfg_;
  ControllerState state_;
};

}  // namespace keel::engine
