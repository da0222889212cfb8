// Fleet snapshot helpers: role names round-trip, lookup by id, the listed TEs.
#include "cluster/protocol/fleet.h"

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

TEST(FleetTest, ForgottenTesLeaveTheList) {
  std::vector<TeInfo> tes;
  tes.push_back({.id = "te-0", .address = "127.0.0.1:1"});
  tes.push_back({.id = "te-1", .address = "127.0.0.1:2", .healthy = false});
  tes.push_back({.id = "te-2", .address = "127.0.0.1:3"});
  EXPECT_EQ(listed_tes(tes, {}), (std::vector<size_t>{0, 1, 2}));  // dead ones stay listed
  EXPECT_EQ(listed_tes(tes, {"127.0.0.1:2"}), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(listed_tes(tes, {"127.0.0.1:1", "127.0.0.1:3", "127.0.0.1:9"}),
            (std::vector<size_t>{1}));
  EXPECT_TRUE(listed_tes({}, {"127.0.0.1:1"}).empty());
}

}  // namespace
}  // namespace keel::cluster
