// SemiPdSplit: parsing `--semi-pd-split`, its range check and the worker core sets (disjoint when
// the split fits, overlapping as MPS when it does not).
#include "engine/semi_pd_split.h"

#include <gtest/gtest.h>

namespace keel::engine {
namespace {

TEST(SemiPdSplitTest, ParsesXY) {
  auto s = parse_semi_pd_split("3,5");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(*s, (SemiPdSplit{3, 5}));
  for (const char* bad : {"", "3", "3,", ",5", "a,b", "3;5", "3,5,7", "-1,2"}) {
    auto r = parse_semi_pd_split(bad);
    if (r.ok()) {
      EXPECT_FALSE(r->validate(16).ok()) << bad;
    } else {
      EXPECT_NE(r.error().message().find("--semi-pd-split"), std::string::npos) << bad;
    }
  }
}

TEST(SemiPdSplitTest, ValidatesAgainstCores) {
  EXPECT_TRUE((SemiPdSplit{2, 2}).validate(2).ok());
  EXPECT_FALSE((SemiPdSplit{3, 1}).validate(2).ok());
  EXPECT_FALSE((SemiPdSplit{1, 0}).validate(2).ok());
}

TEST(SemiPdSplitTest, CoreSetsAreDisjointWhenTheyFitAndOverlapOtherwise) {
  const std::vector<int> cores = {0, 1, 2, 3, 4, 5, 6, 7};
  SemiPdCoreSets a = semi_pd_core_sets({3, 5}, cores);
  EXPECT_EQ(a.prefill, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(a.decode, (std::vector<int>{3, 4, 5, 6, 7}));
  SemiPdCoreSets b = semi_pd_core_sets({6, 4}, cores);
  EXPECT_EQ(b.prefill, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(b.decode, (std::vector<int>{4, 5, 6, 7}));   // 4 and 5 shared
  SemiPdCoreSets c = semi_pd_core_sets({1, 1}, {4, 9});  // the allowed set, not 0..n
  EXPECT_EQ(c.prefill, (std::vector<int>{4}));
  EXPECT_EQ(c.decode, (std::vector<int>{9}));
  EXPECT_FALSE(allowed_cores().empty());
}

}  // namespace
}  // namespace keel::engine
