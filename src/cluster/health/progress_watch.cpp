// ProgressWatch and te_health_reply (see progress_watch.h).
#include "cluster/health/progress_watch.h"

#include <nlohmann/json.hpp>

namespace keel::cluster {

health::TeState ProgressWatch::observe(int64_t steps, bool has_work, Clock::time_point now) {
  if (!seen_ || !has_work || steps != steps_) {
    moved_ = now;  // first sample, idle, or a step since the last sample
    seen_ = true;
  }
  steps_ = steps;
  since_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - moved_);
  return health::classify({.link_open = true,
                           .reported = true,
                           .has_work = has_work,
                           .since_report = std::chrono::milliseconds(0),
                           .since_progress = since_},
                          config_);
}

HealthReply te_health_reply(TePhase phase, health::TeState state, const engine::EngineStats& stats,
                            std::chrono::milliseconds since_progress) {
  nlohmann::json body;
  HealthReply out;
  if (phase == TePhase::kWarm) {
    body["status"] = "warm";
    out.body = body.dump();
    return out;
  }
  body["status"] = phase == TePhase::kDraining ? std::string("draining")
                                               : std::string(health::te_state_name(state));
  body["steps"] = stats.steps_total;
  body["running"] = stats.num_running;
  body["waiting"] = stats.num_waiting;
  body["since_progress_ms"] = since_progress.count();
  out.status = phase == TePhase::kServing && health::serving(state) ? 200 : 503;
  out.body = body.dump();
  return out;
}

}  // namespace keel::cluster
