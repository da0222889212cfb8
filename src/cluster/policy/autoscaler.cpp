// The autoscaler's step function (see autoscaler.h).
#include "cluster/policy/autoscaler.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace keel::cluster::autoscale {
namespace {

// The requests a TE holds (its share of the concurrency).
int64_t te_requests(const TeInfo& te) { return int64_t{te.load.num_waiting} + te.load.num_running; }

// Mean concurrency over the samples taken at or after `since_s` (0 when none).
double mean_since(const std::deque<AutoscalerState::Sample>& samples, double since_s) {
  double sum = 0.0;
  int64_t n = 0;
  for (const auto& s : samples) {
    if (s.t_s < since_s) continue;
    sum += s.concurrency;
    ++n;
  }
  return n == 0 ? 0.0 : sum / static_cast<double>(n);
}

int32_t replicas_for(double concurrency, double target) {
  if (concurrency <= 0.0) return 0;
  const double n = std::ceil(concurrency / target - 1e-9);
  return static_cast<int32_t>(std::min(n, 1e6));
}

double mean_kv_use(const std::vector<TeInfo>& tes) {
  double sum = 0.0;
  int64_t n = 0;
  for (const TeInfo& te : tes) {
    if (te.load.kv_blocks_total <= 0) continue;
    sum +=
        static_cast<double>(te.load.kv_blocks_used) / static_cast<double>(te.load.kv_blocks_total);
    ++n;
  }
  return n == 0 ? 0.0 : sum / static_cast<double>(n);
}

// Attainment of the observations since `since_s`; -1 below `min_samples`.
template <typename Pick>
double attainment_since(const std::deque<AutoscalerState::SloSample>& slo, double since_s,
                        int64_t min_samples, Pick pick) {
  SloCount sum;
  for (const auto& s : slo) {
    if (s.t_s < since_s) continue;
    sum.met += pick(s).met;
    sum.total += pick(s).total;
  }
  if (sum.total < std::max<int64_t>(1, min_samples)) return -1.0;
  return static_cast<double>(sum.met) / static_cast<double>(sum.total);
}

// Keeps the samples of the last `window_s` seconds.
template <typename Deque>
void trim(Deque& d, double now_s, double window_s) {
  while (!d.empty() && d.front().t_s < now_s - window_s) d.pop_front();
}

// The TEs to drain: the least loaded first (requests, then KV blocks, then id).
std::vector<std::string> choose_drains(std::vector<TeInfo> tes, int32_t n) {
  std::sort(tes.begin(), tes.end(), [](const TeInfo& a, const TeInfo& b) {
    return std::make_tuple(te_requests(a), a.load.kv_blocks_used, a.id) <
           std::make_tuple(te_requests(b), b.load.kv_blocks_used, b.id);
  });
  std::vector<std::string> out;
  for (int32_t i = 0; i < n && i < static_cast<int32_t>(tes.size()); ++i) out.push_back(tes[i].id);
  return out;
}

}  // namespace

Status AutoscalerConfig::validate() const {
  if (min_replicas < 0) return Status::invalid_argument("autoscaler: --min must be >= 0");
  if (max_replicas < 1 || max_replicas < min_replicas) {
    return Status::invalid_argument("autoscaler: --max must be >= 1 and >= --min");
  }
  if (!(target_concurrency > 0.0)) {
    return Status::invalid_argument("autoscaler: --target-concurrency must be > 0");
  }
  if (!(stable_window_s > 0.0) || !(panic_window_s > 0.0) || panic_window_s > stable_window_s) {
    return Status::invalid_argument(
        "autoscaler: windows must be > 0 and --panic-window <= --stable-window");
  }
  if (!(panic_threshold >= 1.0)) {
    return Status::invalid_argument("autoscaler: the panic threshold must be >= 1");
  }
  if (scale_down_delay_s < 0.0 || scale_to_zero_grace_s < 0.0 || ttft_slo_s < 0.0 ||
      tpot_slo_s < 0.0) {
    return Status::invalid_argument("autoscaler: delays and SLOs must be >= 0");
  }
  if (!(slo_target > 0.0 && slo_target <= 1.0) || !(kv_high > 0.0 && kv_high <= 1.0)) {
    return Status::invalid_argument("autoscaler: slo_target and kv_high must be in (0, 1]");
  }
  return {};
}

std::string_view scale_reason_name(ScaleReason reason) {
  switch (reason) {
    case ScaleReason::kSteady:
      return "steady";
    case ScaleReason::kConcurrency:
      return "concurrency";
    case ScaleReason::kPanic:
      return "panic";
    case ScaleReason::kActivate:
      return "activate";
    case ScaleReason::kKvPressure:
      return "kv_pressure";
    case ScaleReason::kSloMiss:
      return "slo_miss";
    case ScaleReason::kScaleDownDelay:
      return "scale_down_delay";
    case ScaleReason::kScaleToZeroGrace:
      return "scale_to_zero_grace";
    case ScaleReason::kScaleToZero:
      return "scale_to_zero";
    case ScaleReason::kMinReplicas:
      return "min_replicas";
    case ScaleReason::kMaxReplicas:
      return "max_replicas";
  }
  return "unknown";
}

ScaleDecision decide(const GroupSignals& s, const AutoscalerConfig& c, AutoscalerState& state) {
  ScaleDecision d;
  const double now = s.now_s;
  d.current = static_cast<int32_t>(s.tes.size()) + std::max(0, s.pending);
  d.concurrency =
      static_cast<double>(std::max<int64_t>(0, s.in_flight) + std::max<int64_t>(0, s.held));
  state.samples.push_back({now, d.concurrency});
  trim(state.samples, now, c.stable_window_s);
  state.slo.push_back({now, s.ttft, s.tpot});
  trim(state.slo, now, c.stable_window_s);
  if (d.concurrency > 0.0) state.last_demand_s = now;

  // Concurrency: the stable and panic windows.
  d.stable_concurrency = mean_since(state.samples, now - c.stable_window_s);
  d.panic_concurrency = mean_since(state.samples, now - c.panic_window_s);
  const int32_t want_stable = replicas_for(d.stable_concurrency, c.target_concurrency);
  const int32_t want_panic = replicas_for(d.panic_concurrency, c.target_concurrency);
  if (d.current > 0 && want_panic > d.current &&
      static_cast<double>(want_panic) >= c.panic_threshold * d.current) {
    state.panic_until_s = now + c.stable_window_s;
  }
  d.panic = now < state.panic_until_s;
  int32_t desired = want_stable;
  d.reason = ScaleReason::kConcurrency;
  if (d.panic) {
    desired = std::max({want_panic, want_stable, d.current});
    d.reason = ScaleReason::kPanic;
  }
  if (d.current == 0 && d.concurrency > 0.0) {
    desired = std::max({desired, want_panic, 1});
    d.reason = ScaleReason::kActivate;
  }

  // KV pressure and SLO attainment: one more TE than now.
  d.kv_use = mean_kv_use(s.tes);
  if (!s.tes.empty() && d.kv_use >= c.kv_high && desired <= d.current) {
    desired = d.current + 1;
    d.reason = ScaleReason::kKvPressure;
  }
  // Only observations after the last scale-up judge the SLO (the new TE gets its chance).
  const double slo_since =
      std::max(now - c.stable_window_s, std::nextafter(state.last_scale_up_s, now));
  if (c.ttft_slo_s > 0.0) {
    d.ttft_attainment = attainment_since(state.slo, slo_since, c.slo_min_samples,
                                         [](const auto& x) { return x.ttft; });
  }
  if (c.tpot_slo_s > 0.0) {
    d.tpot_attainment = attainment_since(state.slo, slo_since, c.slo_min_samples,
                                         [](const auto& x) { return x.tpot; });
  }
  const bool slo_miss = (d.ttft_attainment >= 0.0 && d.ttft_attainment < c.slo_target) ||
                        (d.tpot_attainment >= 0.0 && d.tpot_attainment < c.slo_target);
  if (!s.tes.empty() && slo_miss && desired <= d.current) {
    desired = d.current + 1;
    d.reason = ScaleReason::kSloMiss;
  }
  // A TE added for KV or SLO stays a stable window, whatever concurrency says.
  if (d.reason == ScaleReason::kKvPressure || d.reason == ScaleReason::kSloMiss) {
    state.floor = desired;
    state.floor_until_s = now + c.stable_window_s;
  } else if (now < state.floor_until_s && desired < state.floor) {
    desired = std::min(state.floor, std::max(d.current, desired));
    d.reason = ScaleReason::kScaleDownDelay;
  }

  // Scale-down delay: the highest desired count of the delay window.
  state.desired.push_back({now, desired});
  trim(state.desired, now, c.scale_down_delay_s);
  if (desired < d.current) {
    int32_t recent = desired;
    for (const auto& x : state.desired) recent = std::max(recent, x.desired);
    if (recent > desired) {
      desired = std::min(recent, d.current);
      d.reason = ScaleReason::kScaleDownDelay;
    }
  }
  // Scale to zero only after the grace period since the last request.
  if (desired == 0 && d.current > 0 && c.min_replicas == 0) {
    if (now - state.last_demand_s < c.scale_to_zero_grace_s) {
      desired = 1;
      d.reason = ScaleReason::kScaleToZeroGrace;
    } else {
      d.reason = ScaleReason::kScaleToZero;
    }
  }
  if (desired == d.current && d.reason != ScaleReason::kPanic &&
      d.reason != ScaleReason::kScaleToZeroGrace && d.reason != ScaleReason::kScaleDownDelay) {
    d.reason = ScaleReason::kSteady;
  }
  if (desired < c.min_replicas) {
    desired = c.min_replicas;
    d.reason = ScaleReason::kMinReplicas;
  }
  if (desired > c.max_replicas) {
    desired = c.max_replicas;
    d.reason = ScaleReason::kMaxReplicas;
  }
  d.desired = desired;

  if (desired > d.current) {
    d.scale_out = desired - d.current;
    state.last_scale_up_s = now;
  } else if (desired < d.current) {
    d.drain = choose_drains(s.tes, d.current - desired);
  }
  return d;
}

}  // namespace keel::cluster::autoscale
