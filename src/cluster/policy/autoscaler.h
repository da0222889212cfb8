// The autoscaler as a step function, per model and role: decide(signals, config, state) → a
// ScaleDecision (how many TEs to bind, which to drain), no I/O — the cluster manager
// (tools/cluster_autoscaler.h) gathers the signals, applies the actions and calls again on its next
// tick. The rules are Knative KPA's, with DeepServe's SLO signal added:
//   - concurrency = requests in flight or queued at the group's TEs + requests held at the gateway
//     (no TE yet); averaged over a stable window and a shorter panic window; desired =
//     ceil(average / target_concurrency);
//   - panic when the panic window's desired count is >= panic_threshold × current; panic lasts a
//     stable window past the last time that held, and while panicking the count never goes down;
//   - a scale-down follows the highest desired count of the last scale_down_delay seconds;
//   - KV use above kv_high, or TTFT/TPOT SLO attainment below slo_target over the requests
//     observed since the last scale-up (within the stable window), adds one TE, kept for a
//     stable window;
//   - zero TEs only when the stable window saw no demand and scale_to_zero_grace has passed since
//     the last request; a request arriving at zero TEs binds one at once (activation);
//   - the result is clamped to [min_replicas, max_replicas].
// Invariants: 0 <= desired <= max_replicas; scale_out > 0 only when desired > current; drained
// TEs are among the signals' TEs, least loaded first.
//
// Thread safety: pure functions; a state belongs to one caller.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/protocol/fleet.h"
#include "core/status.h"

namespace keel::cluster::autoscale {

struct AutoscalerConfig {
  int32_t min_replicas = 0;           // TEs kept even when idle
  int32_t max_replicas = 1;           // TEs at most (>= min_replicas, >= 1)
  double target_concurrency = 4.0;    // requests in flight or queued per TE the group aims at
  double stable_window_s = 60.0;      // the averaging window of normal operation
  double panic_window_s = 6.0;        // the short window (Knative: 10 % of the stable one)
  double panic_threshold = 2.0;       // panic when panic-window desired >= this × current
  double scale_down_delay_s = 0.0;    // a scale-down follows the max desired over this window
  double scale_to_zero_grace_s = 30;  // idle time after the last request before zero TEs
  double kv_high = 0.9;               // mean KV use at or above this adds a TE
  double ttft_slo_s = 0.0;            // TTFT objective (0 = none)
  double tpot_slo_s = 0.0;            // time per output token objective (0 = none)
  double slo_target = 0.9;            // attainment below this adds a TE
  int64_t slo_min_samples = 8;        // observations needed before attainment counts
  [[nodiscard]] Status validate() const;
};

// Observations against one SLO: how many, and how many within it.
struct SloCount {
  int64_t met = 0;
  int64_t total = 0;
};

// One tick's view of one group (model, role).
struct GroupSignals {
  double now_s = 0.0;       // a monotonic clock, seconds
  std::vector<TeInfo> tes;  // the group's ready TEs (healthy, bound, not draining)
  int32_t pending = 0;      // TEs being bound (counted as replicas, never drained)
  int64_t in_flight = 0;    // requests running or queued at the group's TEs
  int64_t held = 0;         // requests held at the gateway while no TE is ready
  SloCount ttft;            // new TTFT observations since the previous tick
  SloCount tpot;            // new inter-token gaps since the previous tick
};

// What the step remembers between ticks.
struct AutoscalerState {
  struct Sample {
    double t_s = 0.0;
    double concurrency = 0.0;
  };
  struct SloSample {
    double t_s = 0.0;
    SloCount ttft, tpot;
  };
  struct DesiredSample {
    double t_s = 0.0;
    int32_t desired = 0;
  };
  std::deque<Sample> samples;         // within the stable window
  std::deque<SloSample> slo;          // within the stable window
  std::deque<DesiredSample> desired;  // within the scale-down delay
  double panic_until_s = -std::numeric_limits<double>::infinity();
  double last_demand_s = -std::numeric_limits<double>::infinity();
  double last_scale_up_s = -std::numeric_limits<double>::infinity();
  // The count a KV or SLO rule set, kept until floor_until_s.
  int32_t floor = 0;
  double floor_until_s = -std::numeric_limits<double>::infinity();
};

// Why the desired count is what it is (the strongest rule that set it).
enum class ScaleReason {
  kSteady,            // concurrency says the current count
  kConcurrency,       // the stable window's concurrency
  kPanic,             // the panic window's concurrency (or held there while panicking)
  kActivate,          // a request waits and no TE is ready
  kKvPressure,        // KV use at or above kv_high
  kSloMiss,           // TTFT or TPOT attainment below slo_target
  kScaleDownDelay,    // a scale-down held back (the delay window, or a KV/SLO TE's stable window)
  kScaleToZeroGrace,  // one TE kept until the grace period after the last request passed
  kScaleToZero,       // no demand for the stable window and the grace period
  kMinReplicas,       // clamped up to min_replicas
  kMaxReplicas,       // clamped down to max_replicas
};
[[nodiscard]] std::string_view scale_reason_name(ScaleReason reason);

struct ScaleDecision {
  int32_t current = 0;  // ready + pending TEs
  int32_t desired = 0;
  ScaleReason reason = ScaleReason::kSteady;
  bool panic = false;
  // The signals as the rule saw them.
  double concurrency = 0.0;         // this tick's
  double stable_concurrency = 0.0;  // averaged over the stable window
  double panic_concurrency = 0.0;   // averaged over the panic window
  double kv_use = 0.0;              // mean over the ready TEs (0 when none)
  double ttft_attainment = -1.0;    // over the window; -1 = not enough observations (or no SLO)
  double tpot_attainment = -1.0;
  // Actions.
  int32_t scale_out = 0;           // TEs to bind
  std::vector<std::string> drain;  // TE ids to drain and stop, least loaded first
};

[[nodiscard]] ScaleDecision decide(const GroupSignals& signals, const AutoscalerConfig& config,
                                   AutoscalerState& state);

}  // namespace keel::cluster::autoscale
