// SemiPdControlLoop (see semi_pd_control_loop.h).
#include "host/semi_pd_control_loop.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "core/log.h"
#include "engine/semi_pd_window_stats.h"

namespace keel::host {

namespace {

nlohmann::json optional_json(const std::optional<double>& v) {
  return v.has_value() ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json fit_json(const engine::LatencyFit& f) {
  nlohmann::json j = {{"a", f.a}, {"b", f.b}, {"points", f.num_points}, {"usable", f.usable()}};
  if (!f.usable()) j["degenerate"] = f.degenerate;
  return j;
}

}  // namespace

std::string semi_pd_decision_json(const engine::WindowObservation& obs, const engine::Decision& d) {
  const nlohmann::json j = {
      {"event", "semi_pd_decision"},
      {"observed",
       {{"x", obs.x},
        {"y", obs.y},
        {"split_stable", obs.split_stable},
        {"ttft_s", optional_json(obs.ttft_s)},
        {"tpot_s", optional_json(obs.tpot_s)},
        {"arrival_rate", obs.arrival_rate},
        {"prefill_core_s", obs.prefill_core_s},
        {"lambda_prime", engine::lambda_prime(obs.arrival_rate, obs.prefill_core_s)}}},
      {"reason", std::string(engine::decision_reason_name(d.reason))},
      {"detail", d.detail},
      {"x", d.x},
      {"y", d.y},
      {"changed", d.changed},
      {"ttft_fit", fit_json(d.ttft_fit)},
      {"tpot_fit", fit_json(d.tpot_fit)},
      {"predicted_ttft_s", optional_json(d.predicted_ttft_s)},
      {"predicted_tpot_s", optional_json(d.predicted_tpot_s)}};
  return j.dump();
}

SemiPdControlLoop::SemiPdControlLoop(engine::SemiPdEngine* engine, engine::ControllerConfig cfg,
                                     std::chrono::milliseconds window)
    : engine_(engine),
      controller_(cfg, engine->split().prefill, engine->split().decode),
      percentile_(cfg.percentile),
      window_(window) {
  engine_->take_window();  // the first window starts now
  thread_ = std::thread([this] { run(); });
}

SemiPdControlLoop::~SemiPdControlLoop() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void SemiPdControlLoop::stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

void SemiPdControlLoop::run() {
  UniqueLock lock(mu_);
  const auto stopped = [this] {
    mu_.assert_held();  // a wait's predicate runs under its lock
    return stop_;
  };
  while (!cv_.wait_for(lock.native(), window_, stopped)) {
    lock.unlock();
    one_window();
    lock.lock();
  }
}

void SemiPdControlLoop::one_window() {
  const engine::SemiPdWindow w = engine_->take_window();
  const engine::WindowObservation obs = engine::window_observation(w, percentile_);
  const engine::Decision d = controller_.on_window(obs);
  if (d.changed) {
    if (Status s = engine_->set_split(engine::SemiPdSplit{d.x, d.y}); !s.ok()) {
      KEEL_LOG_WARN("semi-PD controller: split {},{} refused: {}", d.x, d.y, s.message());
    }
  }
  engine_->note_decision(std::string(engine::decision_reason_name(d.reason)), d.predicted_ttft_s,
                         d.predicted_tpot_s);
  KEEL_LOG_INFO("{}", semi_pd_decision_json(obs, d));
}

}  // namespace keel::host
