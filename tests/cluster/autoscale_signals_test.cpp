// Per-role autoscaler signals from one fleet snapshot, without processes: each group sees only its
// role's TEs and requests; draining TEs count as work but not as replicas, stopped ones not at
// all; a role with no ready TE holds every request not at a TE of the model; TTFT counts only
// where the policy has a TTFT objective and inter-token gaps only where it has a TPOT one; the
// previous histograms are replaced by this call's.
#include "cluster/policy/autoscale_signals.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace keel::cluster::autoscale {
namespace {

TeInfo role_te(const std::string& id, TeRole role, int32_t waiting, int32_t running) {
  TeInfo t;
  t.id = id;
  t.address = "127.0.0.1:" + id;
  t.role = role;
  t.model = "m";
  t.load.num_waiting = waiting;
  t.load.num_running = running;
  return t;
}

engine::HistogramSnapshot cumulative_hist(std::vector<uint64_t> cumulative) {
  engine::HistogramSnapshot h;
  h.bounds = {0.1, 0.5, 1.0};
  h.count = cumulative.back();
  h.cumulative = std::move(cumulative);
  return h;
}

// A PD fleet (p0, p1 prefill; d0, d1 decode), a colocated TE and another model's prefill TE.
FleetStatus pd_fleet() {
  FleetStatus s;
  s.fleet.tes = {role_te("p0", TeRole::kPrefill, 2, 1),   role_te("p1", TeRole::kPrefill, 0, 1),
                 role_te("d0", TeRole::kDecode, 0, 6),    role_te("d1", TeRole::kDecode, 1, 4),
                 role_te("c0", TeRole::kColocated, 0, 3), role_te("x0", TeRole::kPrefill, 9, 9)};
  s.fleet.tes.back().model = "other";
  s.metrics.resize(s.fleet.tes.size());
  for (engine::MetricsSnapshot& m : s.metrics) {
    m.time_to_first_token_seconds = cumulative_hist({1, 2, 2, 4});
    m.inter_token_latency_seconds = cumulative_hist({5, 5, 6, 6});
  }
  return s;
}

std::vector<std::string> te_ids(const GroupSignals& s) {
  std::vector<std::string> out;
  for (const TeInfo& t : s.tes) out.push_back(t.id);
  return out;
}

TEST(AutoscaleSignalsTest, EachRoleSeesItsOwnTesAndRequests) {
  const FleetStatus status = pd_fleet();
  std::map<std::string, engine::MetricsSnapshot> last_p, last_d;
  const GroupSignals p =
      group_signals(status, {"m", TeRole::kPrefill}, {}, {}, {20, 0}, 1.5, &last_p);
  EXPECT_EQ(te_ids(p), (std::vector<std::string>{"p0", "p1"}));
  EXPECT_EQ(p.in_flight, 4) << "the prefill TEs' queues only, not the gateway's 20";
  EXPECT_EQ(p.held, 0);
  EXPECT_EQ(p.now_s, 1.5);
  EXPECT_EQ(p.pending, 0);
  const GroupSignals d =
      group_signals(status, {"m", TeRole::kDecode}, {}, {}, {20, 0}, 1.5, &last_d);
  EXPECT_EQ(te_ids(d), (std::vector<std::string>{"d0", "d1"}));
  EXPECT_EQ(d.in_flight, 11);
  std::map<std::string, engine::MetricsSnapshot> last_c;
  const GroupSignals c =
      group_signals(status, {"m", TeRole::kColocated}, {}, {}, {20, 2}, 1.5, &last_c);
  EXPECT_EQ(te_ids(c), (std::vector<std::string>{"c0"}));
  EXPECT_EQ(c.in_flight, 18) << "colocated: the gateway's requests less the held ones";
  EXPECT_EQ(c.held, 2);
}

TEST(AutoscaleSignalsTest, DrainingTesAreWorkNotReplicasAndStoppedOnesAreNeither) {
  const FleetStatus status = pd_fleet();
  const std::set<std::string> draining = {"127.0.0.1:d1"};
  const std::set<std::string> stopped = {"127.0.0.1:d0"};
  std::map<std::string, engine::MetricsSnapshot> last;
  const GroupSignals d =
      group_signals(status, {"m", TeRole::kDecode}, {}, {&draining, &stopped}, {0, 0}, 0, &last);
  EXPECT_TRUE(d.tes.empty());
  EXPECT_EQ(d.in_flight, 5) << "d1's requests, still finishing";
  FleetStatus unhealthy = pd_fleet();
  unhealthy.fleet.tes[0].healthy = false;
  const GroupSignals p =
      group_signals(unhealthy, {"m", TeRole::kPrefill}, {}, {}, {0, 0}, 0, &last);
  EXPECT_EQ(te_ids(p), (std::vector<std::string>{"p1"}));
  EXPECT_EQ(p.in_flight, 1);
}

TEST(AutoscaleSignalsTest, ARoleWithNoReadyTeHoldsEveryRequestNotAtATe) {
  FleetStatus status = pd_fleet();
  std::erase_if(status.fleet.tes, [](const TeInfo& t) { return t.role == TeRole::kDecode; });
  status.metrics.resize(status.fleet.tes.size());
  std::map<std::string, engine::MetricsSnapshot> last;
  // 12 requests at the gateway: 7 at this model's TEs (p0 3, p1 1, c0 3), so 5 wait.
  const GroupSignals d = group_signals(status, {"m", TeRole::kDecode}, {}, {}, {12, 1}, 0, &last);
  EXPECT_TRUE(d.tes.empty());
  EXPECT_EQ(d.held, 5);
  EXPECT_EQ(d.in_flight, 0);
  const GroupSignals p = group_signals(status, {"m", TeRole::kPrefill}, {}, {}, {12, 1}, 0, &last);
  EXPECT_EQ(p.held, 1) << "a role with ready TEs takes only the gateway's held count";
}

TEST(AutoscaleSignalsTest, SloCountsFollowThePolicysObjectivesSinceTheLastCall) {
  FleetStatus status = pd_fleet();
  AutoscalerConfig ttft_only;
  ttft_only.ttft_slo_s = 0.5;
  std::map<std::string, engine::MetricsSnapshot> last;
  GroupSignals p = group_signals(status, {"m", TeRole::kPrefill}, ttft_only, {}, {}, 0, &last);
  EXPECT_EQ(p.ttft.total, 8) << "4 TTFTs at each of p0 and p1";
  EXPECT_EQ(p.ttft.met, 4);
  EXPECT_EQ(p.tpot.total, 0) << "no TPOT objective, no count";
  EXPECT_EQ(last.size(), 2u);
  EXPECT_EQ(last.count("p0"), 1u);
  // One more TTFT at p0, over the objective: only the new one counts.
  status.metrics[0].time_to_first_token_seconds = cumulative_hist({1, 2, 2, 5});
  p = group_signals(status, {"m", TeRole::kPrefill}, ttft_only, {}, {}, 0.2, &last);
  EXPECT_EQ(p.ttft.total, 1);
  EXPECT_EQ(p.ttft.met, 0);

  AutoscalerConfig tpot_only;
  tpot_only.tpot_slo_s = 0.1;
  std::map<std::string, engine::MetricsSnapshot> last_d;
  const GroupSignals d =
      group_signals(status, {"m", TeRole::kDecode}, tpot_only, {}, {}, 0, &last_d);
  EXPECT_EQ(d.tpot.total, 12);
  EXPECT_EQ(d.tpot.met, 10);
  EXPECT_EQ(d.ttft.total, 0);
}

}  // namespace
}  // namespace keel::cluster::autoscale
