// cp_plan: zig-zag chunks cover a prefill once, balanced; decode owners keep shards even.
#include "cp/cp_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace keel::cp {
namespace {

TEST(CpPlanTest, ZigZagGivesMemberIChunksIAnd2NMinus1MinusI) {
  const auto split = zigzag_split(0, 512, 4);  // 8 chunks of 64
  ASSERT_EQ(split.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const auto& s = split[static_cast<size_t>(i)];
    ASSERT_EQ(s.size(), 128u);
    EXPECT_EQ(s.front(), 64 * i);
    EXPECT_EQ(s[63], 64 * i + 63);
    EXPECT_EQ(s[64], 64 * (7 - i));
    EXPECT_EQ(s.back(), 64 * (7 - i) + 63);
  }
}

TEST(CpPlanTest, UnevenLengthsCoverEveryPositionOnceFromAnOffset) {
  for (int n : {1, 2, 3, 5}) {
    const int32_t begin = 100, end = 100 + 517;
    const auto split = zigzag_split(begin, end, n);
    std::vector<int32_t> all;
    size_t lo = SIZE_MAX, hi = 0;
    for (const auto& s : split) {
      EXPECT_TRUE(std::is_sorted(s.begin(), s.end()));
      all.insert(all.end(), s.begin(), s.end());
      lo = std::min(lo, s.size());
      hi = std::max(hi, s.size());
    }
    std::sort(all.begin(), all.end());
    ASSERT_EQ(all.size(), 517u) << n;
    for (size_t i = 0; i < all.size(); ++i) ASSERT_EQ(all[i], begin + static_cast<int32_t>(i));
    EXPECT_LE(hi - lo, 2u) << n;
  }
}

TEST(CpPlanTest, DecodeOwnerIsTheMemberWithFewestPositionsLowestRankFirst) {
  const int64_t a[] = {5, 3, 3, 4};
  EXPECT_EQ(decode_owner(a), 1);
  const int64_t b[] = {2, 2};
  EXPECT_EQ(decode_owner(b), 0);
  const int64_t c[] = {7};
  EXPECT_EQ(decode_owner(c), 0);
}

}  // namespace
}  // namespace keel::cp
