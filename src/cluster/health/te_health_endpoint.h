// TeHealthEndpoint: `keel te --health-port`: the TE's HTTP GET /health from progress
// (cluster/health/progress_watch.h), for Kubernetes' readiness and liveness probes. It starts
// before the TE is bound (a warm TE: 200 "warm"); serve() points it at the bound engine, which a
// thread of its own samples every 100 ms — so the verdict does not depend on how often it is asked
// — and draining() (from SIGTERM on) makes it 503 "draining" and lets go of the engine before the
// engine stops.
//
// Thread safety: serve/draining from the TE's main thread; the sampler and the HTTP thread are
// its own; all state under one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "cluster/health/health_http.h"
#include "cluster/health/progress_watch.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/thread_annotations.h"
#include "engine/types.h"

namespace keel::cluster {

class TeHealthEndpoint {
 public:
  static Result<std::unique_ptr<TeHealthEndpoint>> start(const std::string& host, int port,
                                                         std::chrono::milliseconds hang_timeout);
  ~TeHealthEndpoint();
  TeHealthEndpoint(const TeHealthEndpoint&) = delete;
  TeHealthEndpoint& operator=(const TeHealthEndpoint&) = delete;

  [[nodiscard]] uint16_t port() const { return http_->port(); }
  using StatsFn = std::function<engine::EngineStats()>;  // the engine's stats (EngineClient::stats)
  void serve(StatsFn stats);  // bound: verdicts from the engine's progress
  void draining();            // 503 from now on; the engine is let go

 private:
  explicit TeHealthEndpoint(std::chrono::milliseconds hang_timeout);
  void sample_loop();
  HealthReply reply();

  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  StatsFn engine_ KEEL_GUARDED_BY(mu_);  // empty: no engine (warm, or let go)
  TePhase phase_ KEEL_GUARDED_BY(mu_) = TePhase::kWarm;
  ProgressWatch watch_ KEEL_GUARDED_BY(mu_);
  health::TeState state_ KEEL_GUARDED_BY(mu_) = health::TeState::kHealthy;
  engine::EngineStats stats_ KEEL_GUARDED_BY(mu_);
  std::thread sampler_;
  std::unique_ptr<HealthHttp> http_;
};

// While alive, `health` (may be null) judges the engine `stats` reads; at its end — any return of
// the TE's serving function, before the engine goes — the endpoint says draining and lets go of it.
class HealthServing {
 public:
  HealthServing(TeHealthEndpoint* health, TeHealthEndpoint::StatsFn stats) : health_(health) {
    if (health_ != nullptr) health_->serve(std::move(stats));
  }
  ~HealthServing() {
    if (health_ != nullptr) health_->draining();
  }
  HealthServing(const HealthServing&) = delete;
  HealthServing& operator=(const HealthServing&) = delete;

 private:
  TeHealthEndpoint* health_;
};

}  // namespace keel::cluster
