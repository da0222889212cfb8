// The cluster manager's replacement rule over hand-built fleet snapshots (no processes).
#include "cluster/policy/te_replacement.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

using health::TeState;

TeInfo te(const std::string& address, TeState state) {
  TeInfo t;
  t.id = address;
  t.address = address;
  t.state = state;
  t.healthy = health::serving(state);
  return t;
}

ManagedTe managed(const std::string& address, TeRole role = TeRole::kColocated) {
  ManagedTe m;
  m.name = "te-" + address;
  m.address = address;
  m.role = role;
  m.keel_command = {"keel"};
  m.spec.id = m.name;
  m.spec.model_path = "/m.gguf";
  return m;
}

TEST(TeReplacementTest, HungAndDeadTesAreReplacedOnce) {
  FleetSnapshot fleet;
  fleet.tes = {te("a", TeState::kHealthy), te("b", TeState::kHung), te("c", TeState::kDead),
               te("d", TeState::kBusy)};
  std::vector<ManagedTe> tes = {managed("a"), managed("b"), managed("c"), managed("d")};
  std::vector<ReplaceAction> actions = decide_replacements(fleet, tes, 0);
  ASSERT_EQ(actions.size(), 2u);
  EXPECT_EQ(actions[0].te_idx, 1u);
  EXPECT_EQ(actions[0].state, TeState::kHung);
  EXPECT_EQ(actions[0].how, ReplaceHow::kColdStart);
  EXPECT_EQ(actions[1].te_idx, 2u);
  EXPECT_EQ(actions[1].state, TeState::kDead);
  tes[1].replaced = tes[2].replaced = true;
  EXPECT_TRUE(decide_replacements(fleet, tes, 0).empty());
}

TEST(TeReplacementTest, UnknownOrUnlistedTesAreLeftAlone) {
  FleetSnapshot fleet;
  fleet.tes = {te("x", TeState::kHung)};  // not started by this manager
  EXPECT_TRUE(decide_replacements(fleet, {managed("a")}, 0).empty());  // "a" not listed
}

TEST(TeReplacementTest, WarmPoolServesReplacementsOfEveryRoleWhileItLasts) {
  FleetSnapshot fleet;
  fleet.tes = {te("a", TeState::kHung), te("b", TeState::kDead), te("p", TeState::kDead)};
  const std::vector<ManagedTe> tes = {managed("p", TeRole::kPrefill), managed("a"), managed("b")};
  const std::vector<ReplaceAction> actions = decide_replacements(fleet, tes, 2);
  ASSERT_EQ(actions.size(), 3u);
  EXPECT_EQ(actions[0].how, ReplaceHow::kWarmPool);  // a warm TE binds to the prefill role too
  EXPECT_EQ(actions[1].how, ReplaceHow::kWarmPool);
  EXPECT_EQ(actions[2].how, ReplaceHow::kColdStart);  // the pool's two idle TEs are taken
}

TEST(TeReplacementTest, AReplacementKeepsTheSpecUnderItsOwnId) {
  TeSpec old;
  old.id = "te-0";
  old.model_path = "/m.gguf";
  old.engine.max_num_seqs = 3;
  const TeSpec fresh = replacement_spec(old, "te-5");
  EXPECT_EQ(fresh.id, "te-5");
  TeSpec want = old;
  want.id = "te-5";
  EXPECT_EQ(fresh, want);
}

}  // namespace
}  // namespace keel::cluster
