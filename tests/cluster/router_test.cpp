// Router tests: every branch of DeepServe's Algorithm 1 (PD-aware choice from the heatmap or from
// what exists, locality when balanced, least load when not, no capacity), the balance threshold
// at its boundary, unhealthy and other-model TEs skipped, tier weighting, tie-breaks, the KV term
// of the load, a semi-PD TE among colocated TEs and pairs, the baseline policies, the counters
// and the config.
#include "cluster/job/router.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <vector>

#include "cluster/router_fixture.h"

namespace keel::cluster {
namespace {

using namespace router_testing;

TEST(RouterTest, NoHealthyTeIsNoCapacity) {
  Fixture f;
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kNoCapacity);
  EXPECT_TRUE(d.te_id.empty());
  EXPECT_NE(d.reason.find("no healthy TE"), std::string::npos) << d.reason;

  f.fleet.tes = {colo("te-0", 0, /*healthy=*/false),
                 te("te-1", TeRole::kColocated, 0, true, "other-model")};
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kNoCapacity);
}

// A PD fleet short of one role (its only decode TE died and the replacement is not up yet): the
// other role's TEs run whole requests, as colocated TEs would; counted as a role fallback.
TEST(RouterTest, APdFleetShortOfOneRoleRunsWholeRequestsOnTheOther) {
  Fixture f;
  f.fleet.tes = {te("p-0", TeRole::kPrefill, 300), te("p-1", TeRole::kPrefill, 10),
                 te("d-0", TeRole::kDecode, 0, /*healthy=*/false)};
  RouteDecision d = f.run();
  EXPECT_NE(d.branch, RouteBranch::kNoCapacity);
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "p-1");  // least load
  EXPECT_TRUE(d.decode_te_id.empty());
  EXPECT_TRUE(d.role_fallback);
  EXPECT_NE(d.reason.find("no decode TE"), std::string::npos) << d.reason;
  RouterCounters counters;
  counters.record(d);
  EXPECT_EQ(counters.role_fallback, 1);
  EXPECT_EQ(counters.pd_colocated, 1);
  // Only a decode TE: it runs the whole request (it computes the prompt itself).
  f.fleet.tes = {te("p-0", TeRole::kPrefill, 0, /*healthy=*/false), te("d-0", TeRole::kDecode, 0)};
  d = f.run();
  EXPECT_EQ(d.te_id, "d-0");
  EXPECT_TRUE(d.role_fallback);
  // The decode TE back: disaggregated again, no fallback.
  f.fleet.tes[0].healthy = true;
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_FALSE(d.role_fallback);
}

TEST(RouterTest, BalancedLoadsPickTheLongestPrefix) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 110), colo("te-2", 100)};
  f.hold("te-0", {1, 2});
  f.hold("te-1", {1, 2, 3, 4, 5});
  f.hold("te-2", {2, 3, 4, 5, 6, 7});  // not a leading run: no match
  const RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "te-1");
  EXPECT_EQ(d.match, (PrefixMatch{5, 5, 0}));
  EXPECT_TRUE(d.decode_te_id.empty());
  EXPECT_FALSE(d.heatmap_value.has_value());
}

// A TE a scale-out just added holds no prefix: within balance_abs_tokens locality would pick the
// busy TE that holds it, and leave the new one idle. An idle TE beside a busy one is never
// balanced, so least load gives it the request; once it has work, locality decides again.
TEST(RouterTest, AnIdleTeBesideABusyOneTakesTheRequestWhateverThePrefix) {
  Fixture f;
  f.config.balance_abs_tokens = 4096;
  TeInfo busy = colo("te-0", 900);
  busy.load.num_running = 8;
  f.fleet.tes = {busy, colo("te-1", 0)};
  f.hold("te-0", {1, 2, 3, 4});
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-1");
  // te-1 got it (pending until its next report): balanced again, the prefix decides.
  f.fleet.tes[1].load.pending_tokens = 200;
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
  // Every TE idle: balanced (locality), as before.
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 0)};
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
  // One request on the prefix's TE (a conversation's last turn, still in its report): the next
  // turn goes to its prefix, not to the idle TE.
  TeInfo one = colo("te-0", 300);
  one.load.num_running = 1;
  f.fleet.tes = {one, colo("te-1", 0)};
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
}

TEST(RouterTest, UnbalancedLoadsPickTheLeastLoaded) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 1000), colo("te-1", 200)};
  f.hold("te-0", {1, 2, 3, 4, 5, 6, 7, 8});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-1");
  EXPECT_EQ(d.match.num_blocks, 0);
}

TEST(RouterTest, BalanceThresholdBoundary) {
  Fixture f;
  f.hold("te-0", {1, 2, 3});
  // (100 − 75) / 100 = 0.25 ≤ 0.25: balanced, locality wins over load.
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 75)};
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
  // (100 − 74) / 100 = 0.26 > 0.25: unbalanced.
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 74)};
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-1");
  // The threshold is the config's.
  f.config.balance_threshold = 0.3;
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
  // Tiny loads: the denominator is max(max load, 1), so 1 vs 0 is a spread of 1 (unbalanced),
  // and an idle fleet is balanced.
  f.config.balance_threshold = 0.25;
  f.fleet.tes = {colo("te-0", 1), colo("te-1", 0)};
  EXPECT_EQ(f.run().branch, RouteBranch::kLeastLoad);
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 0)};
  EXPECT_EQ(f.run().branch, RouteBranch::kLocality);
}

TEST(RouterTest, AbsoluteBalanceThreshold) {
  Fixture f;
  f.hold("te-0", {1, 2, 3});
  // 1000 vs 200 is far out of the relative threshold ...
  f.fleet.tes = {colo("te-0", 1000), colo("te-1", 200)};
  EXPECT_EQ(f.run().branch, RouteBranch::kLeastLoad);
  // ... but within 800 tokens of each other it counts as balanced.
  f.config.balance_abs_tokens = 800;
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
  f.config.balance_abs_tokens = 799;
  EXPECT_EQ(f.run().branch, RouteBranch::kLeastLoad);
  f.config.balance_abs_tokens = -1;
  EXPECT_FALSE(f.config.validate().ok());
}

TEST(RouterTest, UnhealthyTesAreSkipped) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 0, /*healthy=*/false), colo("te-1", 10), colo("te-2", 10)};
  f.hold("te-0", {1, 2, 3, 4, 5, 6, 7, 8});  // best prefix and least load, but dead
  f.hold("te-2", {1});
  RouteDecision d = f.run();
  EXPECT_EQ(d.te_id, "te-2");
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  // The dead TE's load does not make the live ones look unbalanced either.
  f.fleet.tes[0].load.pending_tokens = 1000000;
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  // Every policy skips it.
  f.fleet.tes[0].load.pending_tokens = 0;
  for (RoutePolicy p : {RoutePolicy::kRoundRobin, RoutePolicy::kLeastLoad, RoutePolicy::kPrefix}) {
    f.config.policy = p;
    for (uint64_t c = 0; c < 4; ++c) {
      f.cursor = c;
      EXPECT_NE(f.run().te_id, "te-0") << route_policy_name(p) << " cursor " << c;
    }
  }
}

TEST(RouterTest, OtherModelsAreSkipped) {
  Fixture f;
  f.fleet.tes = {te("x-0", TeRole::kColocated, 0, true, "other"), colo("te-1", 50)};
  f.hold("x-0", {1, 2, 3});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.te_id, "te-1");
}

TEST(RouterTest, PoolHitsWeighMoreThanLowerTierHits) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 100)};
  f.hold("te-0", {1, 2, 3, 4, 5}, "dram");  // score 5 × 0.5 = 2.5
  f.hold("te-1", {1, 2, 3});                // score 3
  RouteDecision d = f.run();
  EXPECT_EQ(d.te_id, "te-1");
  EXPECT_EQ(d.match, (PrefixMatch{3, 3, 0}));
  // Lower tiers weighted fully: the longer run wins.
  f.config.lower_tier_weight = 1.0;
  d = f.run();
  EXPECT_EQ(d.te_id, "te-0");
  EXPECT_EQ(d.match, (PrefixMatch{5, 0, 5}));
  // Mixed: a pool copy of the first two blocks makes te-0's score 2 + 3 × 0.5 = 3.5 > 3.
  f.config.lower_tier_weight = 0.5;
  f.hold("te-0", {1, 2});
  d = f.run();
  EXPECT_EQ(d.te_id, "te-0");
  EXPECT_EQ(d.match, (PrefixMatch{5, 2, 3}));
}

TEST(RouterTest, LocalityTiesGoToTheLeastLoaded) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 90), colo("te-2", 80)};
  f.hold("te-0", {1, 2});
  f.hold("te-1", {1, 2});
  f.hold("te-2", {1});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-1");
}

TEST(RouterTest, FullTiesAreBrokenByTheCursor) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 0), colo("te-2", 0)};
  std::vector<std::string> chosen;
  for (uint64_t c = 0; c < 4; ++c) {
    f.cursor = c;
    chosen.push_back(f.run().te_id);
  }
  EXPECT_EQ(chosen, (std::vector<std::string>{"te-0", "te-1", "te-2", "te-0"}));
}

TEST(RouterTest, KvUseCountsInTheLoad) {
  Fixture f;
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 100)};
  f.fleet.tes[0].load.kv_blocks_used = 90;
  f.fleet.tes[0].load.kv_blocks_total = 100;
  f.fleet.tes[1].load.kv_blocks_used = 10;
  f.fleet.tes[1].load.kv_blocks_total = 100;
  f.hold("te-0", {1, 2, 3, 4});
  // Loads 100 + 0.9 × 4096 vs 100 + 0.1 × 4096: unbalanced, te-1 despite te-0's prefix.
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-1");
  // Without the KV term the loads are equal: locality.
  f.config.kv_pressure_tokens = 0;
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
}

TEST(RouterTest, HeatmapAboveThresholdDisaggregates) {
  Fixture f;
  f.fleet = mixed_fleet();
  f.heatmap = flat_heatmap(0.4);
  f.hold("p-1", {1, 2, 3});
  f.hold("c-0", {1, 2, 3, 4, 5, 6});  // the colocated TE's prefix does not matter here
  const RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "p-1");         // prefill by locality
  EXPECT_EQ(d.decode_te_id, "d-1");  // decode by least load
  EXPECT_EQ(d.match.num_blocks, 3);
  ASSERT_TRUE(d.heatmap_value.has_value());
  EXPECT_DOUBLE_EQ(*d.heatmap_value, 0.4);
}

TEST(RouterTest, DisaggregatedPrefillByLoadWhenUnbalanced) {
  Fixture f;
  f.fleet = mixed_fleet();
  f.fleet.tes[2].load.pending_tokens = 5000;  // p-1 holds the prefix but is busy
  f.heatmap = flat_heatmap(1.0);
  f.hold("p-1", {1, 2, 3});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "p-0");
  EXPECT_EQ(d.decode_te_id, "d-1");
}

TEST(RouterTest, HeatmapAtOrBelowThresholdColocates) {
  Fixture f;
  f.fleet = mixed_fleet();
  f.heatmap = flat_heatmap(-0.3);
  RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "c-0");
  EXPECT_TRUE(d.decode_te_id.empty());
  ASSERT_TRUE(d.heatmap_value.has_value());
  EXPECT_DOUBLE_EQ(*d.heatmap_value, -0.3);
  // Exactly at the threshold: colocated; the threshold is the config's.
  f.heatmap = flat_heatmap(0.0);
  EXPECT_EQ(f.run().pd, PdMode::kPdColocated);
  f.heatmap = flat_heatmap(0.3);
  f.config.pd_threshold = 0.5;
  EXPECT_EQ(f.run().pd, PdMode::kPdColocated);
  f.config.pd_threshold = 0.2;
  EXPECT_EQ(f.run().pd, PdMode::kPdDisaggregated);
}

TEST(RouterTest, HeatmapIsReadAtThePromptAndPredictedDecode) {
  Fixture f;
  f.fleet = mixed_fleet();
  // Disaggregate only long decodes: ratio ≥ 4 positive.
  auto map = PdHeatmap::create({1, 100000}, {0, 2, 4}, {{-1, -1, 1}, {-1, -1, 1}});
  ASSERT_TRUE(map.ok());
  f.heatmap = *std::move(map);
  f.prompt_tokens = 100;
  f.decode_tokens = 100;  // ratio 1
  EXPECT_EQ(f.run().pd, PdMode::kPdColocated);
  f.decode_tokens = 1000;  // ratio 10, clamped to the last bin
  EXPECT_EQ(f.run().pd, PdMode::kPdDisaggregated);
}

TEST(RouterTest, WithoutHeatmapOrOneKindUseWhatExists) {
  Fixture f;
  f.fleet = mixed_fleet();
  // Both kinds, no heatmap: a pair is one more replica, its load its prefill TE's plus the least
  // loaded decode TE's (p-0, p-1: 100 + 50); c-0 (100) is the least loaded.
  RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "c-0");
  EXPECT_FALSE(d.heatmap_value.has_value());
  EXPECT_NE(d.reason.find("no heatmap"), std::string::npos) << d.reason;
  // c-0 busier than a pair: the pair takes it (least load), decode on the least loaded d-1.
  f.fleet.tes[0].load.pending_tokens = 1000;
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_EQ(d.te_id.front(), 'p');
  EXPECT_EQ(d.decode_te_id, "d-1");
  // Balanced loads: the pair holding the prompt's prefix takes it (locality).
  f.fleet.tes[0].load.pending_tokens = 150;
  f.hold("p-1", {1, 2});
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "p-1");
  // Idle and equal: the cursor shares the requests among the colocated TE and the pairs.
  f.fleet.tes[0].load.pending_tokens = 0;
  for (size_t i = 1; i < f.fleet.tes.size(); ++i) f.fleet.tes[i].load.pending_tokens = 0;
  f.index.remove_te("p-1");
  std::set<std::string> chosen;
  for (uint64_t c = 0; c < 3; ++c) {
    f.cursor = c;
    chosen.insert(f.run().te_id);
  }
  EXPECT_EQ(chosen, (std::set<std::string>{"c-0", "p-0", "p-1"}));
  f.cursor = 0;
  f.fleet = mixed_fleet();
  // Only the pair (the colocated TE is down), heatmap says colocate: disaggregated anyway.
  f.fleet.tes[0].healthy = false;
  f.heatmap = flat_heatmap(-1.0);
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_FALSE(d.decode_te_id.empty());
  EXPECT_FALSE(d.heatmap_value.has_value());
  // Only colocated (decode TEs down), heatmap says disaggregate: colocated anyway.
  f.fleet.tes[0].healthy = true;
  f.fleet.tes[3].healthy = false;
  f.fleet.tes[4].healthy = false;
  f.heatmap = flat_heatmap(1.0);
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "c-0");
}

// A semi-PD TE (TeInfo::semi_pd: a colocated TE whose engine splits prefill and decode over one KV
// pool) beside a colocated TE and a prefill/decode pair: it is chosen for whole requests like any
// colocated TE — by its load (both workers' queues, KV use) and its prefix — and never as half of
// a disaggregated pair.
TEST(RouterTest, SemiPdTeServesWholeRequestsBesideColocatedAndPairs) {
  Fixture f;
  f.fleet = mixed_fleet();
  TeInfo semi = colo("s-0", 10);
  semi.semi_pd = true;
  f.fleet.tes.push_back(semi);
  f.config.balance_abs_tokens = 0;
  // No heatmap, both kinds: c-0 has 100 pending tokens, s-0 10, each pair 150: s-0 by least load.
  RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "s-0");
  EXPECT_TRUE(d.decode_te_id.empty());
  // Its KV use counts in its load: nearly full, it loses to c-0.
  f.fleet.tes.back().load.kv_blocks_used = 95;
  f.fleet.tes.back().load.kv_blocks_total = 100;
  d = f.run();
  EXPECT_EQ(d.te_id, "c-0");
  // Balanced loads: the prefix decides, and a semi-PD TE can hold it (the heatmap keeps the pairs
  // out of this step).
  f.heatmap = flat_heatmap(-0.5);
  f.fleet.tes.back().load = TeLoad{.pending_tokens = 100};
  f.hold("s-0", {1, 2, 3});
  d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "s-0");
  // The heatmap says disaggregate: the pair, never the semi-PD TE.
  f.heatmap = flat_heatmap(0.5);
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_EQ(d.te_id.front(), 'p');
  EXPECT_EQ(d.decode_te_id.front(), 'd');
  // Only semi-PD TEs left for whole requests (c-0 down), heatmap says colocate: s-0.
  f.fleet.tes[0].healthy = false;
  f.heatmap = flat_heatmap(-0.5);
  d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdColocated);
  EXPECT_EQ(d.te_id, "s-0");
}

// KV kept across tool calls: the TE holding the program's pin goes first, before the PD step,
// locality and load, under every policy — even when another TE holds a longer prefix or less load.
TEST(RouterTest, RoundRobinPolicyCyclesOverTheHealthyGroup) {
  Fixture f;
  f.config.policy = RoutePolicy::kRoundRobin;
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 0, /*healthy=*/false), colo("te-2", 99999)};
  f.hold("te-0", {1, 2, 3});
  std::vector<std::string> chosen;
  for (uint64_t c = 0; c < 4; ++c) {
    f.cursor = c;
    const RouteDecision d = f.run();
    EXPECT_EQ(d.branch, RouteBranch::kRoundRobin);
    chosen.push_back(d.te_id);
  }
  EXPECT_EQ(chosen, (std::vector<std::string>{"te-0", "te-2", "te-0", "te-2"}));
}

TEST(RouterTest, RoundRobinPolicyDisaggregatedPicksBothByCursor) {
  Fixture f;
  f.config.policy = RoutePolicy::kRoundRobin;
  f.fleet = mixed_fleet();
  f.fleet.tes[0].healthy = false;  // pair only
  f.heatmap = flat_heatmap(-1.0);  // baselines ignore it anyway
  f.cursor = 1;
  const RouteDecision d = f.run();
  EXPECT_EQ(d.pd, PdMode::kPdDisaggregated);
  EXPECT_EQ(d.te_id, "p-1");
  EXPECT_EQ(d.decode_te_id, "d-1");
  f.cursor = 2;
  EXPECT_EQ(f.run().decode_te_id, "d-0");  // not the least loaded: round robin
}

TEST(RouterTest, LeastLoadPolicyIgnoresPrefixEvenWhenBalanced) {
  Fixture f;
  f.config.policy = RoutePolicy::kLeastLoad;
  f.fleet.tes = {colo("te-0", 100), colo("te-1", 99)};
  f.hold("te-0", {1, 2, 3, 4});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-1");
}

TEST(RouterTest, PrefixPolicyIgnoresImbalance) {
  Fixture f;
  f.config.policy = RoutePolicy::kPrefix;
  f.fleet.tes = {colo("te-0", 100000), colo("te-1", 0)};
  f.hold("te-0", {1});
  const RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-0");
}

TEST(RouterTest, BaselinesSkipTheHeatmap) {
  Fixture f;
  f.fleet = mixed_fleet();
  f.heatmap = flat_heatmap(1.0);
  for (RoutePolicy p : {RoutePolicy::kRoundRobin, RoutePolicy::kLeastLoad, RoutePolicy::kPrefix}) {
    f.config.policy = p;
    const RouteDecision d = f.run();
    EXPECT_EQ(d.pd, PdMode::kPdColocated) << route_policy_name(p);
    EXPECT_EQ(d.te_id, "c-0") << route_policy_name(p);
    EXPECT_FALSE(d.heatmap_value.has_value());
  }
}

TEST(RouterCountersTest, CountsPerBranchAndMode) {
  RouterCounters counters;
  RouteDecision locality{.branch = RouteBranch::kLocality,
                         .pd = PdMode::kPdDisaggregated,
                         .te_id = "p",
                         .decode_te_id = "d",
                         .match = {4, 3, 1}};
  RouteDecision least{.branch = RouteBranch::kLeastLoad, .te_id = "c"};
  RouteDecision rr{.branch = RouteBranch::kRoundRobin, .te_id = "c"};
  RouteDecision none{.branch = RouteBranch::kNoCapacity};
  counters.record(locality);
  counters.record(locality);
  counters.record(least);
  counters.record(rr);
  counters.record(none);
  EXPECT_EQ(counters, (RouterCounters{.locality = 2,
                                      .least_load = 1,
                                      .round_robin = 1,
                                      .no_capacity = 1,
                                      .pd_colocated = 2,
                                      .pd_disaggregated = 2,
                                      .matched_blocks = 8,
                                      .matched_pool_blocks = 6}));
}

TEST(RouterConfigTest, ValidateAndPolicyNames) {
  EXPECT_TRUE(RouterConfig{}.validate().ok());
  EXPECT_FALSE((RouterConfig{.balance_threshold = -0.1}).validate().ok());
  EXPECT_FALSE((RouterConfig{.balance_threshold = 1.5}).validate().ok());
  EXPECT_FALSE((RouterConfig{.lower_tier_weight = 2.0}).validate().ok());
  EXPECT_FALSE(
      (RouterConfig{.pd_threshold = std::numeric_limits<double>::quiet_NaN()}).validate().ok());
  EXPECT_FALSE((RouterConfig{.kv_pressure_tokens = -1}).validate().ok());
  EXPECT_NE((RouterConfig{.lower_tier_weight = 2.0}).validate().message().find("lower_tier_weight"),
            std::string::npos);
  for (RoutePolicy p : {RoutePolicy::kDeepServe, RoutePolicy::kRoundRobin, RoutePolicy::kLeastLoad,
                        RoutePolicy::kPrefix}) {
    EXPECT_EQ(parse_route_policy(route_policy_name(p)), p);
  }
  EXPECT_EQ(route_policy_name(RoutePolicy::kDeepServe), "deepserve");
  EXPECT_FALSE(parse_route_policy("random").has_value());
  EXPECT_EQ(route_branch_name(RouteBranch::kNoCapacity), "no_capacity");
  EXPECT_EQ(pd_mode_name(PdMode::kPdDisaggregated), "disaggregated");
}

}  // namespace
}  // namespace keel::cluster
