// TeHealthEndpoint (see te_health_endpoint.h).
#include "cluster/health/te_health_endpoint.h"

namespace keel::cluster {

TeHealthEndpoint::TeHealthEndpoint(std::chrono::milliseconds hang_timeout)
    : watch_(health::HealthConfig{.hang_timeout = hang_timeout}) {}

Result<std::unique_ptr<TeHealthEndpoint>> TeHealthEndpoint::start(
    const std::string& host, int port, std::chrono::milliseconds hang_timeout) {
  if (port < 0 || port > 65535) {
    return Status::invalid_argument("--health-port must be 0..65535, not " + std::to_string(port));
  }
  if (hang_timeout.count() <= 0) {
    return Status::invalid_argument("--health-hang-ms must be positive");
  }
  std::unique_ptr<TeHealthEndpoint> e(new TeHealthEndpoint(hang_timeout));
  KEEL_ASSIGN_OR_RETURN(e->http_, HealthHttp::start(host, static_cast<uint16_t>(port), "/health",
                                                    [p = e.get()] { return p->reply(); }));
  e->sampler_ = std::thread([p = e.get()] { p->sample_loop(); });
  return e;
}

TeHealthEndpoint::~TeHealthEndpoint() {
  if (http_) http_->stop();
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

void TeHealthEndpoint::serve(StatsFn stats) {
  MutexLock lock(mu_);
  engine_ = std::move(stats);
  phase_ = TePhase::kServing;
}

void TeHealthEndpoint::draining() {
  MutexLock lock(mu_);
  engine_ = nullptr;  // the engine may go now: never asked again
  phase_ = TePhase::kDraining;
}

void TeHealthEndpoint::sample_loop() {
  UniqueLock lock(mu_);
  while (!stopping_) {
    if (engine_) {
      stats_ = engine_();
      const bool work = stats_.num_running + stats_.num_waiting > 0;
      state_ = watch_.observe(stats_.steps_total, work, std::chrono::steady_clock::now());
    }
    cv_.wait_for(lock.native(), std::chrono::milliseconds(100), [&] {
      mu_.assert_held();
      return stopping_;
    });
  }
}

HealthReply TeHealthEndpoint::reply() {
  MutexLock lock(mu_);
  return te_health_reply(phase_, state_, stats_, watch_.since_progress());
}

}  // namespace keel::cluster
