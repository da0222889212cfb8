// plan_takeover: a manager that wins the election adopts the TEs a previous leader left running
// (matched by role, each once) and starts only the rest, with ids no live TE holds.
#include "cluster/policy/takeover_plan.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

std::vector<std::string> ids(const std::vector<TeToStart>& s) {
  std::vector<std::string> out;
  for (const TeToStart& t : s) out.push_back(t.id);
  return out;
}

TEST(TakeoverPlanTest, FirstLeaderStartsEverything) {
  const TakeoverPlan p = plan_takeover({"colocated", "colocated"}, {});
  EXPECT_EQ(ids(p.start), (std::vector<std::string>{"te-0", "te-1"}));
  EXPECT_EQ(p.start[1].wanted_idx, 1u);
  EXPECT_TRUE(p.adopted.empty());
}

TEST(TakeoverPlanTest, StandbyAdoptsTheLiveTesAndStartsNone) {
  const TakeoverPlan p =
      plan_takeover({"colocated", "colocated"}, {{"te-1", "colocated"}, {"te-0", "colocated"}});
  EXPECT_TRUE(p.start.empty());
  EXPECT_EQ(p.adopted, (std::vector<std::string>{"te-1", "te-0"}));
}

TEST(TakeoverPlanTest, StartsTheShortfallWithFreshIds) {
  // te-0 died with the old leader's host; te-1 lives: one new TE, not named te-1.
  const TakeoverPlan p = plan_takeover({"colocated", "colocated", "colocated"},
                                       {{"te-1", "colocated"}, {"te-2", "colocated"}});
  EXPECT_EQ(ids(p.start), (std::vector<std::string>{"te-0"}));
  EXPECT_EQ(p.start[0].wanted_idx, 2u);
  const TakeoverPlan q = plan_takeover({"colocated", "colocated"}, {{"te-0", "colocated"}});
  EXPECT_EQ(ids(q.start), (std::vector<std::string>{"te-1"}));
}

TEST(TakeoverPlanTest, MatchesByRole) {
  // A live decode TE does not stand for a wanted prefill TE; extra live TEs are left alone.
  const TakeoverPlan p = plan_takeover(
      {"prefill", "decode"}, {{"te-0", "decode"}, {"te-5", "decode"}, {"te-9", "colocated"}});
  ASSERT_EQ(p.start.size(), 1u);
  EXPECT_EQ(p.start[0].wanted_idx, 0u);
  EXPECT_EQ(p.start[0].id, "te-1");
  EXPECT_EQ(p.adopted, (std::vector<std::string>{"te-0"}));
}

}  // namespace
}  // namespace keel::cluster
