// KvCache: sizing errors, the per-slot layout and the slot-length bookkeeping.
#include "model/kv_cache.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

namespace keel::model {
namespace {

using ::testing::HasSubstr;

TEST(KvCacheTest, RejectsNonPositiveDimensions) {
  auto c = KvCache::create(2, 0, 8, 4);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(c.error().message(), HasSubstr("n_slots 0"));
}

TEST(KvCacheTest, OverflowingSizeIsResourceExhausted) {
  auto c = KvCache::create(int64_t{1} << 20, 1 << 20, int64_t{1} << 20, int64_t{1} << 20);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(c.error().message(), HasSubstr("overflows"));
}

TEST(KvCacheTest, RowsAreDistinctAndContiguousPerSlot) {
  auto c = KvCache::create(2, 3, 5, 4);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  EXPECT_EQ(c->bytes(), 2u * 2 * 3 * 5 * 4 * sizeof(float));
  // Positions of one slot are row_width apart (what attention relies on).
  EXPECT_EQ(c->k(1, 2, 3) - c->k(1, 2, 0), 3 * 4);
  EXPECT_EQ(c->v(0, 1, 4) - c->v(0, 1, 0), 4 * 4);
  // Every (layer, slot, pos) row is its own memory: tag all rows, then read the tags back.
  const auto for_each_row = [&](const std::function<void(float*, float*, float)>& fn) {
    float tag = 0.0f;
    for (int64_t l = 0; l < 2; ++l) {
      for (int32_t s = 0; s < 3; ++s) {
        for (int64_t p = 0; p < 5; ++p) fn(c->k(l, s, p), c->v(l, s, p), tag++);
      }
    }
  };
  for_each_row([](float* k, float* v, float tag) {
    std::fill_n(k, 4, tag);
    std::fill_n(v, 4, -tag);
  });
  for_each_row([](float* k, float* v, float tag) {
    EXPECT_EQ(k[3], tag);
    EXPECT_EQ(v[0], -tag);
  });
}

TEST(KvCacheTest, SlotLengths) {
  auto c = KvCache::create(1, 2, 8, 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->length(0), 0);
  c->set_length(0, 6);
  c->set_length(1, 2);
  c->truncate(0, 4);
  EXPECT_EQ(c->length(0), 4);
  c->truncate(0, 7);  // never grows
  EXPECT_EQ(c->length(0), 4);
  c->clear(0);
  EXPECT_EQ(c->length(0), 0);
  EXPECT_EQ(c->length(1), 2);
}

}  // namespace
}  // namespace keel::model
