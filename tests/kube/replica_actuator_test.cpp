// The autoscaler through the Kubernetes actuator, without processes: the pure policy
// (cluster::autoscale::decide) driven tick by tick against a simulated Deployment whose pods
// are TEs as soon as spec.replicas says so; each decision goes through ReplicaActuator to the
// fake API server as a merge patch of spec.replicas. Checked: activation from zero, a ramp to
// --max, scale to zero after the grace — the PATCHes recorded are exactly the decisions' counts,
// in order, and nothing is written while the count holds. Then the backoff after a failure.
#include "kube/replica_actuator.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cluster/policy/autoscaler.h"
#include "support/fake_kube_api.h"

namespace keel::kube {
namespace {

namespace as = cluster::autoscale;
using testing::FakeKubeApi;
using Clock = ReplicaActuator::Clock;

ScaleClient client_for(const FakeKubeApi& api) {
  Result<net::Url> u = net::parse_url(api.url());
  EXPECT_TRUE(u.ok());
  ScaleClientConfig c;
  c.request_timeout = std::chrono::milliseconds(1000);
  c.attempts = 1;  // the actuator's backoff is across ticks
  return ScaleClient(KubeConfig{*u, "tok", "keel", ""}, c);
}

std::vector<int> patched_replicas(const FakeKubeApi& api) {
  std::vector<int> out;
  for (const testing::RecordedRequest& r : api.requests()) {
    if (r.method != "PATCH") continue;
    EXPECT_EQ(r.path, "/apis/apps/v1/namespaces/keel/deployments/te-pool/scale");
    EXPECT_EQ(r.authorization, "Bearer tok");
    out.push_back(nlohmann::json::parse(r.body)["spec"]["replicas"].get<int>());
  }
  return out;
}

TEST(ReplicaActuator, AutoscalerDecisionsBecomeReplicaPatches) {
  std::string error;
  auto api = FakeKubeApi::start(&error);
  ASSERT_TRUE(api) << error;
  api->put_deployment("keel", "te-pool", 0);
  ReplicaActuator actuator(client_for(*api), "te-pool");
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(actuator.sync(t0).ok());
  ASSERT_EQ(actuator.known_replicas(), 0);

  as::AutoscalerConfig policy;
  policy.min_replicas = 0;
  policy.max_replicas = 3;
  policy.target_concurrency = 2.0;
  policy.stable_window_s = 2.0;
  policy.panic_window_s = 0.2;
  policy.scale_to_zero_grace_s = 1.0;
  ASSERT_TRUE(policy.validate().ok());
  as::AutoscalerState state;

  std::vector<int> changes;  // the decisions' counts whenever they differ from the current one
  double now_s = 0;
  // held, in_flight per phase: a request waits at zero TEs; a burst of 10; then idle.
  const struct {
    int64_t held, in_flight;
    int ticks;
  } phases[] = {{1, 0, 1}, {0, 10, 30}, {0, 0, 60}};
  for (const auto& phase : phases) {
    for (int i = 0; i < phase.ticks; ++i) {
      as::GroupSignals s;
      s.now_s = now_s;
      for (int t = 0; t < *actuator.known_replicas(); ++t) {
        cluster::TeInfo te;
        te.id = "te-pool-" + std::to_string(t);
        te.load.kv_blocks_total = 100;
        s.tes.push_back(te);
      }
      s.held = phase.held;
      s.in_flight = phase.in_flight;
      const as::ScaleDecision d = as::decide(s, policy, state);
      if (d.desired != d.current) changes.push_back(d.desired);
      Result<bool> wrote = actuator.apply(d.desired, t0 + std::chrono::milliseconds(100 * i));
      ASSERT_TRUE(wrote.ok()) << wrote.status().to_string();
      EXPECT_EQ(*wrote, d.desired != d.current);
      EXPECT_EQ(actuator.known_replicas(), d.desired);
      now_s += 0.1;
    }
  }
  ASSERT_GE(changes.size(), 3u);
  EXPECT_EQ(changes.front(), 1);                                    // activation
  EXPECT_EQ(*std::max_element(changes.begin(), changes.end()), 3);  // clamped to max
  EXPECT_EQ(changes.back(), 0);                                     // scale to zero after the grace
  EXPECT_EQ(patched_replicas(*api), changes);
  EXPECT_EQ(
      api->objects().at("/apis/apps/v1/namespaces/keel/deployments/te-pool")["spec"]["replicas"],
      0);
}

TEST(ReplicaActuator, FailureBacksOffAcrossTicksThenRetries) {
  std::string error;
  auto api = FakeKubeApi::start(&error);
  ASSERT_TRUE(api) << error;
  api->put_deployment("keel", "te-pool", 1);
  ReplicaActuator actuator(client_for(*api), "te-pool");
  const Clock::time_point t0 = Clock::now();
  ASSERT_TRUE(actuator.sync(t0).ok());

  api->force_scale_status(403);
  Result<bool> r = actuator.apply(2, t0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("403 Forbidden"), std::string::npos);
  EXPECT_EQ(actuator.known_replicas(), 1);  // unchanged
  const size_t after_failure = api->requests().size();
  // Within the backoff: no request at all.
  r = actuator.apply(2, t0 + std::chrono::milliseconds(100));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_EQ(api->requests().size(), after_failure);
  // Past it, with RBAC fixed: written.
  api->force_scale_status(0);
  r = actuator.apply(2, t0 + std::chrono::milliseconds(250));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(*r);
  EXPECT_EQ(actuator.known_replicas(), 2);
  EXPECT_EQ(patched_replicas(*api), (std::vector<int>{2, 2}));
}

}  // namespace
}  // namespace keel::kube
