// plan_bind_sources: each mode's choice from the store, the peers and the batch (chain relay).
#include "cluster/weights/bind_source.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TEST(BindSourceTest, ModeNamesRoundTrip) {
  for (BindSourceMode m : {BindSourceMode::kAuto, BindSourceMode::kStore, BindSourceMode::kFork,
                           BindSourceMode::kDisk}) {
    EXPECT_EQ(parse_bind_source_mode(bind_source_mode_name(m)), m);
  }
  EXPECT_FALSE(parse_bind_source_mode("nfs").has_value());
  EXPECT_EQ(bind_source_kind_name(BindSourceKind::kFork), "fork");
}

TEST(BindSourceTest, AutoPrefersStoreThenForkThenDisk) {
  const std::vector<BindTarget> targets = {{true, "h:1"}, {false, "h:2"}};
  std::vector<BindSourcePlan> p = plan_bind_sources(BindSourceMode::kAuto, targets, {"peer:9"});
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].kind, BindSourceKind::kStore);
  EXPECT_TRUE(p[0].fork_from.empty());
  EXPECT_EQ(p[1].kind, BindSourceKind::kFork);
  EXPECT_EQ(p[1].fork_from, "peer:9");
  p = plan_bind_sources(BindSourceMode::kAuto, {{false, "h:1"}}, {});
  EXPECT_EQ(p[0].kind, BindSourceKind::kDisk);
  EXPECT_FALSE(p[0].why.empty());
}

TEST(BindSourceTest, SeveralForksFormAChain) {
  const std::vector<BindTarget> targets = {{false, "h:1"}, {false, ""}, {false, "h:3"}};
  const std::vector<BindSourcePlan> p =
      plan_bind_sources(BindSourceMode::kAuto, targets, {"peer:9", "peer:8"});
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].fork_from, "peer:9");
  EXPECT_EQ(p[1].fork_from, "h:1");  // relayed by the first
  EXPECT_EQ(p[2].fork_from, "h:1");  // the second cannot relay (no weights service)
  // No peer at all: nobody forks, even in a batch.
  for (const BindSourcePlan& q : plan_bind_sources(BindSourceMode::kAuto, targets, {})) {
    EXPECT_EQ(q.kind, BindSourceKind::kDisk);
  }
}

TEST(BindSourceTest, ForcedModes) {
  const std::vector<BindTarget> held = {{true, "h:1"}};
  const std::vector<BindTarget> lacking = {{false, "h:1"}};
  EXPECT_EQ(plan_bind_sources(BindSourceMode::kStore, lacking, {"p:1"})[0].kind,
            BindSourceKind::kDisk);  // store never forks
  EXPECT_EQ(plan_bind_sources(BindSourceMode::kStore, held, {})[0].kind, BindSourceKind::kStore);
  EXPECT_EQ(plan_bind_sources(BindSourceMode::kFork, held, {"p:1"})[0].kind,
            BindSourceKind::kFork);  // fork even with the entry at hand
  EXPECT_EQ(plan_bind_sources(BindSourceMode::kFork, lacking, {})[0].kind, BindSourceKind::kDisk);
  EXPECT_EQ(plan_bind_sources(BindSourceMode::kDisk, held, {"p:1"})[0].kind, BindSourceKind::kDisk);
}

}  // namespace
}  // namespace keel::cluster
