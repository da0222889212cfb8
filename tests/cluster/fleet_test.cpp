// Fleet snapshot helpers: role names round-trip, lookup by id.
#include "cluster/fleet.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TEST(FleetTest, RoleNamesRoundTrip) {
  for (TeRole role : {TeRole::kColocated, TeRole::kPrefill, TeRole::kDecode}) {
    EXPECT_EQ(parse_te_role(te_role_name(role)), role);
  }
  EXPECT_FALSE(parse_te_role("semi").has_value());
}

TEST(FleetTest, FindById) {
  FleetSnapshot fleet;
  fleet.tes.push_back({.id = "te-0", .address = "127.0.0.1:1"});
  fleet.tes.push_back({.id = "te-1", .address = "127.0.0.1:2", .role = TeRole::kDecode});
  ASSERT_NE(fleet.find("te-1"), nullptr);
  EXPECT_EQ(fleet.find("te-1")->role, TeRole::kDecode);
  EXPECT_EQ(fleet.find("te-2"), nullptr);
}

}  // namespace
}  // namespace keel::cluster
