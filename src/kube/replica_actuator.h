// ReplicaActuator: the autoscaler's decisions (a desired TE count, cluster::autoscale::decide())
// applied to a Deployment's spec.replicas through a ScaleClient — the impure edge of a pure
// policy. It remembers the count it last read or wrote and writes only when the desired count
// differs; Kubernetes then starts pods or deletes them (each TE pod's preStop hook drains it).
// A failed call leaves the known count as it was and backs off across ticks (from 200 ms,
// doubling to 5 s), so a dead API server costs the caller's loop one bounded call per backoff,
// never a hang and never a busy loop.
// Invariants: known_replicas() is what the server last confirmed (or empty before the first
// successful call); apply() never writes a negative count.
// Thread safety: one owner (the cluster manager's loop).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "kube/scale_client.h"

namespace keel::kube {

class ReplicaActuator {
 public:
  using Clock = std::chrono::steady_clock;
  ReplicaActuator(ScaleClient client, std::string deployment);

  // Reads spec.replicas (at start: the count the Deployment has).
  Status sync(Clock::time_point now);
  // Writes spec.replicas = desired if it differs from the known count. Ok(false) when nothing
  // was written (same count, or still backing off after a failure: `backing_off()`); the call's
  // error otherwise (the next apply() after the backoff tries again).
  Result<bool> apply(int32_t desired, Clock::time_point now);

  [[nodiscard]] std::optional<int32_t> known_replicas() const { return known_; }
  [[nodiscard]] bool backing_off(Clock::time_point now) const { return now < next_try_; }
  [[nodiscard]] const std::string& deployment() const { return deployment_; }
  [[nodiscard]] const ScaleClient& client() const { return client_; }

 private:
  void failed(Clock::time_point now);

  ScaleClient client_;
  std::string deployment_;
  std::optional<int32_t> known_;
  Clock::time_point next_try_{};
  std::chrono::milliseconds backoff_{0};
};

// The actuator `keel cluster up --scaler k8s` runs: the configuration from `overrides` and the
// process environment, a client that tries each call once within 2 s (the actuator's backoff
// spaces the retries), and a first sync — tried 4 times, 200 ms apart and doubling — so a
// missing Deployment, a rejected token or a dead API server is one clear error at start.
Result<std::unique_ptr<ReplicaActuator>> open_replica_actuator(const KubeConfigOverrides& overrides,
                                                               const std::string& deployment);

}  // namespace keel::kube
