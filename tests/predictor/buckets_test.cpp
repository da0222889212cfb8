// LengthBuckets: bucket boundaries, the cap bucket, midpoints and validation.
#include "predictor/buckets.h"

#include <gtest/gtest.h>

namespace keel::predictor {
namespace {

TEST(LengthBucketsTest, BoundariesAndTheCapBucket) {
  const LengthBuckets b{32, 256};
  ASSERT_TRUE(b.validate().ok());
  EXPECT_EQ(b.num_buckets(), 8);
  EXPECT_EQ(b.bucket_of(0), 0);
  EXPECT_EQ(b.bucket_of(31), 0);
  EXPECT_EQ(b.bucket_of(32), 1);
  EXPECT_EQ(b.bucket_of(255), 7);
  EXPECT_EQ(b.bucket_of(256), 7);  // stopped by the cap
  EXPECT_EQ(b.bucket_of(1000), 7);
  EXPECT_EQ(b.bucket_of(-3), 0);
  EXPECT_EQ(b.lower(1), 32);
  EXPECT_EQ(b.upper(1), 64);
  EXPECT_EQ(b.upper(7), 257);
}

TEST(LengthBucketsTest, MidpointsStayInsideTheirBucket) {
  const LengthBuckets b{16, 250};  // the last bucket, [240, 250], is shorter
  EXPECT_EQ(b.num_buckets(), 16);
  EXPECT_EQ(b.midpoint(0), 7);
  EXPECT_EQ(b.midpoint(1), 23);
  EXPECT_EQ(b.midpoint(15), 245);
  for (int32_t k = 0; k < b.num_buckets(); ++k) EXPECT_EQ(b.bucket_of(b.midpoint(k)), k);
  const LengthBuckets one{1, 3};
  EXPECT_EQ(one.num_buckets(), 3);
  EXPECT_EQ(one.midpoint(2), 2);  // holds 2 and 3
}

TEST(LengthBucketsTest, ValidateRejectsBadShapes) {
  EXPECT_FALSE((LengthBuckets{0, 256}).validate().ok());
  EXPECT_FALSE((LengthBuckets{-1, 256}).validate().ok());
  EXPECT_FALSE((LengthBuckets{64, 32}).validate().ok());
  EXPECT_FALSE((LengthBuckets{1, LengthBuckets::kMaxTokens + 1}).validate().ok());
  EXPECT_TRUE((LengthBuckets{32, 32}).validate().ok());
}

}  // namespace
}  // namespace keel::predictor
