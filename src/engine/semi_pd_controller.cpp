// semi-PD's split controller: the least-squares fits and Algorithm 1's growth rule.
#include "engine/semi_pd_controller.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <utility>

#include "core/check.h"

namespace keel::engine {
namespace {

struct Sample {
  int32_t cores = 0;  // x or y: the split the point was measured at
  double u = 0;       // 1/(x − λ′) or 1/y
  double latency = 0;
};

std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[192];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

// latency = a·u + b by least squares with b ≥ 0; `what` names the model in messages. Two distinct
// splits are required: λ′ varying at one split moves u too, but too little for a usable slope.
LatencyFit fit_linear(const std::vector<Sample>& s, const char* what, std::string dropped_note) {
  LatencyFit f;
  f.num_points = static_cast<int32_t>(s.size());
  bool distinct = false;
  for (const Sample& p : s) distinct = distinct || p.cores != s.front().cores;
  if (!distinct) {
    f.lacks_points = true;
    f.degenerate = std::string(what) + ": fewer than 2 distinct splits among " +
                   std::to_string(f.num_points) + " points" + dropped_note;
    return f;
  }
  double mu = 0, ml = 0;
  for (const Sample& p : s) mu += p.u, ml += p.latency;
  mu /= static_cast<double>(s.size());
  ml /= static_cast<double>(s.size());
  double sxx = 0, sxy = 0;
  for (const Sample& p : s) {
    sxx += (p.u - mu) * (p.u - mu);
    sxy += (p.u - mu) * (p.latency - ml);
  }
  f.a = sxy / sxx;
  f.b = ml - f.a * mu;
  if (f.b < 0) {
    // The least-squares optimum under b ≥ 0 then lies on b = 0 (the problem is convex).
    double suu = 0, sul = 0;
    for (const Sample& p : s) suu += p.u * p.u, sul += p.u * p.latency;
    f.a = sul / suu;
    f.b = 0;
  }
  if (!std::isfinite(f.a) || !std::isfinite(f.b)) {
    f.degenerate = std::string(what) + ": the fit is not finite";
  } else if (f.a <= 0) {
    f.degenerate = std::string(what) + fmt(": a = %.4g ≤ 0 (more cores would not help)", f.a);
  }
  return f;
}

bool finite_nonneg(const std::optional<double>& v) {
  return v.has_value() && std::isfinite(*v) && *v >= 0;
}

enum class Side { kPrefill, kDecode };

// Everything one decision reads, gathered once.
struct Ctx {
  const ControllerConfig& cfg;
  double lambda_p;  // λ′ of the latest window
  const LatencyFit& ttft;
  const LatencyFit& tpot;
  std::optional<double> obs_ttft, obs_tpot;  // the latest window's percentiles

  [[nodiscard]] std::optional<double> predict(Side s, int32_t cores) const {
    return s == Side::kPrefill ? predict_ttft(ttft, cores, lambda_p) : predict_tpot(tpot, cores);
  }
  [[nodiscard]] double slo(Side s) const {
    return s == Side::kPrefill ? cfg.ttft_slo_s : cfg.tpot_slo_s;
  }
  [[nodiscard]] bool misses(Side s) const {
    const std::optional<double>& o = s == Side::kPrefill ? obs_ttft : obs_tpot;
    return finite_nonneg(o) && *o > slo(s);
  }
  // The model says `cores` meets the side's SLO with headroom.
  [[nodiscard]] bool meets(Side s, int32_t cores) const {
    const std::optional<double> p = predict(s, cores);
    return p.has_value() && *p <= (1.0 - cfg.headroom) * slo(s);
  }
  // Whether a donor at `from` cores may drop to `to`: not while it misses now; with a usable fit
  // while its model meets its SLO with headroom; without one (probe_unfitted, for want of
  // points) one step at most, and only if its observed latency has the headroom.
  [[nodiscard]] bool may_give(Side s, int32_t from, int32_t to) const {
    if (to < cfg.min_cores || misses(s)) return false;
    const LatencyFit& f = s == Side::kPrefill ? ttft : tpot;
    if (f.usable()) return meets(s, to);
    const std::optional<double>& o = s == Side::kPrefill ? obs_ttft : obs_tpot;
    return cfg.probe_unfitted && f.lacks_points && from - to <= cfg.step && finite_nonneg(o) &&
           *o <= (1.0 - cfg.headroom) * slo(s);
  }
};

struct Growth {
  int32_t own = 0, other = 0;  // the chosen cores of the grown side and of the other side
  bool predicted_met = false;
  bool donor_limited = false;  // growth stopped because the other side could give no more
};

// Algorithm 1's loop: add `step` up to `max_step` times until the model meets the SLO with
// headroom. When x + y is bounded, the other side gives what the sum lacks as far as may_give()
// allows. `probe` takes one step without a model.
std::optional<Growth> grow(const Ctx& c, Side side, int32_t own, int32_t other, bool probe) {
  const ControllerConfig& cfg = c.cfg;
  const Side donor = side == Side::kPrefill ? Side::kDecode : Side::kPrefill;
  std::optional<Growth> best;
  const int32_t steps = probe ? 1 : cfg.max_step;
  for (int32_t k = 1; k <= steps; ++k) {
    const int32_t o = std::min(own + k * cfg.step, cfg.max_cores);
    if (best && o == best->own) break;  // at max_cores
    int32_t d = other;
    if (cfg.max_total_cores > 0 && o + d > cfg.max_total_cores) {
      d = cfg.max_total_cores - o;
      if (!c.may_give(donor, other, d)) {
        if (best) best->donor_limited = true;
        break;
      }
    }
    best = Growth{o, d, !probe && c.meets(side, o), false};
    if (best->predicted_met) break;
  }
  return best;
}

}  // namespace

std::string_view decision_reason_name(DecisionReason r) {
  switch (r) {
    case DecisionReason::kBothMet:
      return "both_met";
    case DecisionReason::kCooldown:
      return "cooldown";
    case DecisionReason::kGrewPrefill:
      return "grew_prefill";
    case DecisionReason::kGrewDecode:
      return "grew_decode";
    case DecisionReason::kProbePrefill:
      return "probe_prefill";
    case DecisionReason::kProbeDecode:
      return "probe_decode";
    case DecisionReason::kFitDegenerate:
      return "fit_degenerate";
    case DecisionReason::kNoRoom:
      return "no_room";
  }
  return "unknown";
}

Status ControllerConfig::validate() const {
  if (!(ttft_slo_s > 0) || !std::isfinite(ttft_slo_s)) {
    return Status::invalid_argument("semi-PD TTFT SLO must be > 0 seconds");
  }
  if (!(tpot_slo_s > 0) || !std::isfinite(tpot_slo_s)) {
    return Status::invalid_argument("semi-PD TPOT SLO must be > 0 seconds");
  }
  if (!(percentile > 0 && percentile <= 100)) {
    return Status::invalid_argument("semi-PD percentile must be in (0, 100]");
  }
  if (window_iterations < 1) return Status::invalid_argument("semi-PD window must be ≥ 1");
  if (step < 1) return Status::invalid_argument("semi-PD step must be ≥ 1 core");
  if (max_step < 1) return Status::invalid_argument("semi-PD max step must be ≥ 1");
  if (min_cores < 1) return Status::invalid_argument("semi-PD min cores must be ≥ 1");
  if (max_cores < min_cores) {
    return Status::invalid_argument("semi-PD max cores must be ≥ min cores");
  }
  if (max_total_cores != 0 && max_total_cores < 2 * min_cores) {
    return Status::invalid_argument("semi-PD core total must be 0 (unbounded) or ≥ 2 · min cores");
  }
  if (history_windows < 2) return Status::invalid_argument("semi-PD history must be ≥ 2 windows");
  if (!(headroom >= 0 && headroom < 1)) {
    return Status::invalid_argument("semi-PD headroom must be in [0, 1)");
  }
  if (cooldown_windows < 0) return Status::invalid_argument("semi-PD cooldown must be ≥ 0");
  return {};
}

double lambda_prime(double arrival_rate, double prefill_core_s) {
  if (!(arrival_rate > 0) || !(prefill_core_s > 0)) return 0;
  const double v = arrival_rate * prefill_core_s;
  return std::isfinite(v) ? v : 0;
}

LatencyFit fit_ttft(const std::vector<SplitPoint>& points) {
  std::vector<Sample> s;
  int32_t dropped = 0;
  for (const SplitPoint& p : points) {
    if (!finite_nonneg(p.ttft_s)) continue;
    if (p.x <= p.lambda_prime) {
      ++dropped;  // an overloaded window: its TTFT grows with time, not with the split
      continue;
    }
    s.push_back({p.x, 1.0 / (p.x - p.lambda_prime), *p.ttft_s});
  }
  std::string note;
  if (dropped > 0) note = " (" + std::to_string(dropped) + " dropped with x ≤ λ′)";
  return fit_linear(s, "TTFT", note);
}

LatencyFit fit_tpot(const std::vector<SplitPoint>& points) {
  std::vector<Sample> s;
  for (const SplitPoint& p : points) {
    if (finite_nonneg(p.tpot_s) && p.y > 0) s.push_back({p.y, 1.0 / p.y, *p.tpot_s});
  }
  return fit_linear(s, "TPOT", "");
}

std::optional<double> predict_ttft(const LatencyFit& f, int32_t x, double lambda_p) {
  if (!f.usable() || x <= lambda_p) return std::nullopt;
  return f.a / (x - lambda_p) + f.b;
}

std::optional<double> predict_tpot(const LatencyFit& f, int32_t y) {
  if (!f.usable() || y <= 0) return std::nullopt;
  return f.a / y + f.b;
}

namespace {

// Drops the oldest point whose split has a newer point too (the oldest of all when every split is
// alone): a long stay at one split must not push the other splits out of the fits.
void evict_one(std::vector<SplitPoint>& h) {
  for (size_t i = 0; i < h.size(); ++i) {
    for (size_t j = i + 1; j < h.size(); ++j) {
      if (h[j].x == h[i].x && h[j].y == h[i].y) {
        h.erase(h.begin() + static_cast<std::ptrdiff_t>(i));
        return;
      }
    }
  }
  h.erase(h.begin());
}

// Records the observation and refits; the decision is still "keep".
Decision start(const ControllerState& state, const WindowObservation& obs,
               const ControllerConfig& cfg) {
  Decision d;
  d.next = state;
  const double lp = lambda_prime(obs.arrival_rate, obs.prefill_core_s);
  if (obs.split_stable && (obs.ttft_s || obs.tpot_s)) {
    d.next.history.push_back({obs.x, obs.y, lp, obs.ttft_s, obs.tpot_s});
    while (static_cast<int32_t>(d.next.history.size()) > cfg.history_windows) {
      evict_one(d.next.history);
    }
  }
  d.ttft_fit = fit_ttft(d.next.history);
  d.tpot_fit = fit_tpot(d.next.history);
  d.x = state.x;
  d.y = state.y;
  return d;
}

// The missing side's growth, or why there is none; fills d's split and reason.
void apply_growth(const Ctx& c, Side side, const std::string& miss, Decision& d) {
  const bool prefill = side == Side::kPrefill;
  const int32_t own = prefill ? d.x : d.y;
  const int32_t other = prefill ? d.y : d.x;
  const LatencyFit& fit = prefill ? c.ttft : c.tpot;
  const char* name = prefill ? "x" : "y";
  if (own >= c.cfg.max_cores) {
    d.reason = DecisionReason::kNoRoom;
    d.detail = miss + "; " + name + " is at max cores";
    return;
  }
  const bool probe = !fit.usable() && fit.lacks_points && c.cfg.probe_unfitted;
  if (!fit.usable() && !probe) {
    d.reason = DecisionReason::kFitDegenerate;
    d.detail = miss + "; keeping the split: " + fit.degenerate;
    return;
  }
  const std::optional<Growth> g = grow(c, side, own, other, probe);
  if (!g) {
    d.reason = DecisionReason::kNoRoom;
    d.detail = miss + "; the cores are bounded and the other side cannot give one";
    return;
  }
  (prefill ? d.x : d.y) = g->own;
  (prefill ? d.y : d.x) = g->other;
  if (probe) {
    d.reason = prefill ? DecisionReason::kProbePrefill : DecisionReason::kProbeDecode;
    d.detail = miss + "; one step to get a second point: " + fit.degenerate;
  } else {
    d.reason = prefill ? DecisionReason::kGrewPrefill : DecisionReason::kGrewDecode;
    d.detail =
        miss + (g->predicted_met ? "; the model meets it at the new split"
                                 : (g->donor_limited ? "; grew as far as the other side gives"
                                                     : "; still predicted to miss at max step"));
  }
}

}  // namespace

Decision decide(const ControllerState& state, const WindowObservation& obs,
                const ControllerConfig& cfg) {
  Decision d = start(state, obs, cfg);
  const Ctx c{.cfg = cfg,
              .lambda_p = lambda_prime(obs.arrival_rate, obs.prefill_core_s),
              .ttft = d.ttft_fit,
              .tpot = d.tpot_fit,
              .obs_ttft = obs.ttft_s,
              .obs_tpot = obs.tpot_s};
  const bool ttft_miss = c.misses(Side::kPrefill), tpot_miss = c.misses(Side::kDecode);
  if (state.cooldown_left > 0) {
    d.next.cooldown_left = state.cooldown_left - 1;
    d.reason = DecisionReason::kCooldown;
    d.detail = "settling after a change (" + std::to_string(state.cooldown_left) + " left)";
  } else if (!ttft_miss && !tpot_miss) {
    d.reason = DecisionReason::kBothMet;
    d.detail = "both SLOs met (or no data): keep";
  } else if (ttft_miss) {
    // Algorithm 1's listing checks TTFT first, so a window missing both grows x (within the
    // room a bound leaves: decode, missing too, gives no core).
    apply_growth(c, Side::kPrefill, fmt("TTFT %.4g s > SLO %.4g s", *obs.ttft_s, cfg.ttft_slo_s),
                 d);
  } else {
    apply_growth(c, Side::kDecode, fmt("TPOT %.4g s > SLO %.4g s", *obs.tpot_s, cfg.tpot_slo_s), d);
  }
  d.changed = d.x != state.x || d.y != state.y;
  if (d.changed) {
    d.next.x = d.x;
    d.next.y = d.y;
    d.next.cooldown_left = cfg.cooldown_windows;
  }
  d.predicted_ttft_s = c.predict(Side::kPrefill, d.x);
  d.predicted_tpot_s = c.predict(Side::kDecode, d.y);
  return d;
}

SemiPdController::SemiPdController(ControllerConfig cfg, int32_t x, int32_t y)
    : cfg_(std::move(cfg)) {
  KEEL_CHECK_MSG(cfg_.validate().ok(), "SemiPdController needs a validated ControllerConfig");
  state_.x = std::clamp(x, cfg_.min_cores, cfg_.max_cores);
  state_.y = std::clamp(y, cfg_.min_cores, cfg_.max_cores);
}

Decision SemiPdController::on_window(const WindowObservation& obs) {
  Decision d = decide(state_, obs, cfg_);
  state_ = d.next;
  return d;
}

}  // namespace keel::engine
