// ReplicaActuator (see replica_actuator.h).
#include "kube/replica_actuator.h"

#include <algorithm>
#include <thread>

namespace keel::kube {
namespace {
constexpr std::chrono::milliseconds kFirstBackoff{200};
constexpr std::chrono::milliseconds kMaxBackoff{5000};
}  // namespace

ReplicaActuator::ReplicaActuator(ScaleClient client, std::string deployment)
    : client_(std::move(client)), deployment_(std::move(deployment)) {}

void ReplicaActuator::failed(Clock::time_point now) {
  backoff_ = backoff_.count() == 0 ? kFirstBackoff : std::min(backoff_ * 2, kMaxBackoff);
  next_try_ = now + backoff_;
}

Status ReplicaActuator::sync(Clock::time_point now) {
  Result<DeploymentScale> s = client_.get_scale(deployment_);
  if (!s.ok()) {
    failed(now);
    return s.status();
  }
  known_ = s->spec_replicas;
  backoff_ = std::chrono::milliseconds(0);
  return Status();
}

Result<bool> ReplicaActuator::apply(int32_t desired, Clock::time_point now) {
  desired = std::max(desired, 0);
  if (known_ && *known_ == desired) return false;
  if (backing_off(now)) return false;
  Result<DeploymentScale> s = client_.set_replicas(deployment_, desired);
  if (!s.ok()) {
    failed(now);
    return s.status();
  }
  known_ = s->spec_replicas;
  backoff_ = std::chrono::milliseconds(0);
  return true;
}

Result<std::unique_ptr<ReplicaActuator>> open_replica_actuator(const KubeConfigOverrides& overrides,
                                                               const std::string& deployment) {
  if (deployment.empty()) {
    return Status::invalid_argument("kubernetes: --scaler k8s needs --k8s-deployment NAME");
  }
  KEEL_ASSIGN_OR_RETURN(KubeConfig kube, load_kube_config(overrides, process_env()));
  ScaleClientConfig c;
  c.request_timeout = std::chrono::milliseconds(2000);
  c.attempts = 1;
  auto actuator = std::make_unique<ReplicaActuator>(ScaleClient(std::move(kube), c), deployment);
  std::chrono::milliseconds wait = kFirstBackoff;
  Status last;
  constexpr int kTries = 4;
  for (int i = 0; i < kTries; ++i) {
    if (i > 0) {
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
    last = actuator->sync(ReplicaActuator::Clock::now());
    if (last.ok()) return actuator;
    if (last.code() != StatusCode::kUnavailable) return last;  // an answer: retrying won't help
  }
  return last.with_prefix("kubernetes: " + std::to_string(kTries) + " tries");
}

}  // namespace keel::kube
