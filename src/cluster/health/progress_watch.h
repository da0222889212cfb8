// ProgressWatch: a task executor's own verdict on its health, from progress — what its HTTP
// /health says (`keel te --health-port`, Kubernetes' probes). The rule is the JEs'
// (te_health.h classify) applied from the inside: a TE that holds work (running or waiting
// requests) and whose engine step counter has not moved for hang_timeout is hung; holding work
// and stepping, busy; without work, healthy. The process answering is not enough: a TE whose
// engine thread is stuck still answers, and says "hung".
//
// te_health_reply() turns a verdict into the endpoint's answer: 200 for healthy and busy, 503 for
// hung, for a draining TE (it takes no new work) and for a TE whose pipeline stage is gone; a warm
// TE (no model bound yet) is 200 "warm". The body is JSON: status, steps, running, waiting and
// the milliseconds since the step counter last moved.
//
// Thread safety: ProgressWatch is not thread-safe (one owner; the caller locks); the rest is pure.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cluster/health/te_health.h"
#include "engine/types.h"

namespace keel::cluster {

class ProgressWatch {
 public:
  using Clock = std::chrono::steady_clock;
  explicit ProgressWatch(health::HealthConfig config) : config_(config) {}

  // One sample of the engine at `now`: its step counter and whether it holds work. An idle TE
  // owes no progress (its clock restarts when work arrives).
  health::TeState observe(int64_t steps, bool has_work, Clock::time_point now);
  // Since the step counter last moved (or work arrived), as of the last observe().
  [[nodiscard]] std::chrono::milliseconds since_progress() const { return since_; }

 private:
  health::HealthConfig config_;
  bool seen_ = false;
  int64_t steps_ = 0;
  Clock::time_point moved_{};
  std::chrono::milliseconds since_{0};
};

struct HealthReply {
  int status = 200;
  std::string body;  // JSON
};

enum class TePhase { kWarm, kServing, kDraining };

// The /health answer for a TE in `phase` (serving: the verdict `state`, from `stats`).
[[nodiscard]] HealthReply te_health_reply(TePhase phase, health::TeState state,
                                          const engine::EngineStats& stats,
                                          std::chrono::milliseconds since_progress);

}  // namespace keel::cluster
