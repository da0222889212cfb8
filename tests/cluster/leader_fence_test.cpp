// LeaderFence: per election, a node agent admits commands whose fencing token is at least the
// highest it has admitted and refuses lower ones with a message naming both tokens; elections are
// fenced apart.
#include "cluster/policy/leader_fence.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TEST(LeaderFenceTest, AdmitsRisingAndEqualTokensAndRefusesAStaleOne) {
  LeaderFence f;
  EXPECT_TRUE(f.admit("m", 0).ok()) << "no election seen yet: an unfenced command passes";
  EXPECT_TRUE(f.admit("m", 41).ok());
  EXPECT_TRUE(f.admit("m", 41).ok()) << "the same leader's next command";
  EXPECT_TRUE(f.admit("m", 57).ok()) << "a successor";
  EXPECT_EQ(f.highest("m"), 57);

  const Status stale = f.admit("m", 41);
  EXPECT_EQ(stale.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(stale.message().find("41"), std::string::npos) << stale.message();
  EXPECT_NE(stale.message().find("57"), std::string::npos) << stale.message();
  EXPECT_NE(stale.message().find("'m'"), std::string::npos) << stale.message();
  EXPECT_EQ(f.admit("m", 0).code(), StatusCode::kFailedPrecondition)
      << "once a leader has spoken, an unfenced command is refused too";
  EXPECT_EQ(f.highest("m"), 57) << "a refusal leaves the fence where it was";
  EXPECT_EQ(f.refused(), 2);
  EXPECT_EQ(f.admit("m", -1).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(f.admit("m", 57).ok());
}

TEST(LeaderFenceTest, ElectionsAreFencedApart) {
  LeaderFence f;
  ASSERT_TRUE(f.admit("manager-high", 90).ok());
  EXPECT_TRUE(f.admit("manager-low", 12).ok()) << "another model's manager, its own token";
  EXPECT_EQ(f.highest("manager-low"), 12);
  EXPECT_EQ(f.highest("manager-high"), 90);
  EXPECT_EQ(f.highest("none"), 0);
  EXPECT_EQ(f.admit("manager-low", 11).code(), StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace keel::cluster
