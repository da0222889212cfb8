// The router's sticky step (KV kept across tool calls, docs/agent-kv.md): a program's next call
// goes to the TE holding its pin first, under every policy, unless that TE is gone, unhealthy, of
// another model or role, or loaded past the bound.
#include <gtest/gtest.h>

#include "cluster/job/router.h"
#include "cluster/router_fixture.h"

namespace keel::cluster {
namespace {

using namespace router_testing;

TEST(RouterTest, TheStickyTeGoesFirstUnderEveryPolicy) {
  for (RoutePolicy p : {RoutePolicy::kDeepServe, RoutePolicy::kRoundRobin, RoutePolicy::kLeastLoad,
                        RoutePolicy::kPrefix}) {
    Fixture f;
    f.config.policy = p;
    f.fleet = mixed_fleet();        // colocated TEs and a pair
    f.heatmap = flat_heatmap(1.0);  // would disaggregate
    f.fleet.tes.push_back(colo("te-9", 1000));
    f.hold("c-0", {1, 2, 3, 4, 5, 6});  // the longest prefix elsewhere
    f.sticky = "te-9";
    for (uint64_t c = 0; c < 3; ++c) {
      f.cursor = c;
      const RouteDecision d = f.run();
      EXPECT_EQ(d.branch, RouteBranch::kSticky) << route_policy_name(p);
      EXPECT_EQ(d.te_id, "te-9") << route_policy_name(p) << " cursor " << c;
      EXPECT_EQ(d.pd, PdMode::kPdColocated);
      EXPECT_TRUE(d.decode_te_id.empty());
    }
  }
}

// A sticky TE that is gone, unhealthy, of another model or role, or loaded past the bound (its
// load above the least loaded colocated TE's by more than the prompt plus sticky_slack_tokens)
// leaves the request to the normal rule.
TEST(RouterTest, TheNormalRuleDecidesWhenTheStickyTeIsGoneOrOverloaded) {
  Fixture f;
  f.config.sticky_slack_tokens = 1000;
  f.prompt_tokens = 128;
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 1128)};
  f.sticky = "te-1";
  EXPECT_EQ(f.run().branch, RouteBranch::kSticky);  // exactly at the bound: kept
  f.fleet.tes[1].load.pending_tokens = 1129;        // one token past it
  RouteDecision d = f.run();
  EXPECT_EQ(d.branch, RouteBranch::kLeastLoad);
  EXPECT_EQ(d.te_id, "te-0");
  f.fleet.tes[1].load.pending_tokens = 0;
  f.fleet.tes[1].healthy = false;  // dead or hung
  d = f.run();
  EXPECT_NE(d.branch, RouteBranch::kSticky);
  EXPECT_EQ(d.te_id, "te-0");
  f.sticky = "te-7";  // gone (or draining: the JE leaves it out of the snapshot)
  EXPECT_NE(f.run().branch, RouteBranch::kSticky);
  f.fleet.tes = {colo("te-0", 0), te("p-0", TeRole::kPrefill, 0), te("d-0", TeRole::kDecode, 0)};
  f.sticky = "p-0";  // a prefill TE holds no pin of a whole call
  EXPECT_NE(f.run().branch, RouteBranch::kSticky);
  f.fleet.tes = {colo("te-0", 0), te("x-0", TeRole::kColocated, 0, true, "other-model")};
  f.sticky = "x-0";
  EXPECT_EQ(f.run().te_id, "te-0");
  RouterCounters counters;
  f.fleet.tes = {colo("te-0", 0), colo("te-1", 0)};
  f.sticky = "te-1";
  counters.record(f.run());
  EXPECT_EQ(counters.sticky, 1);
  EXPECT_EQ(counters.pd_colocated, 1);
  f.config.sticky_slack_tokens = -1;
  EXPECT_FALSE(f.config.validate().ok());
}

}  // namespace
}  // namespace keel::cluster
