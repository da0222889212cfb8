#include "core/dtype.h"

#include <gtest/gtest.h>

namespace keel {
namespace {

TEST(DTypeTest, BlockLayouts) {
  EXPECT_EQ(dtype_row_bytes(DType::kF32, 10), 40u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_0, 64), 36u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ4_K, 256), 144u);
  EXPECT_EQ(dtype_row_bytes(DType::kQ6_K, 512), 420u);
  EXPECT_EQ(dtype_name(DType::kBF16), "BF16");
}

TEST(DTypeTest, RawIdsAndNames) {
  EXPECT_FALSE(dtype_info(4).has_value());  // retired Q4_2
  EXPECT_FALSE(dtype_info(1000).has_value());
  ASSERT_TRUE(dtype_info(30).has_value());
  EXPECT_EQ(dtype_info(30)->dtype, DType::kBF16);
  EXPECT_EQ(dtype_from_name("q8_0"), DType::kQ8_0);
  EXPECT_EQ(dtype_from_name("nope"), std::nullopt);
}

}  // namespace
}  // namespace keel
