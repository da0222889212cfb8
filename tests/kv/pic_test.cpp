// The PIC link planner: variant names round-trip and bad ones are refused; chunk validation; for a
// prompt [chunk A at 0][gap][chunk B][chunk C][query] every variant's linked / recomputed split,
// with and without a prefix hit, a prompt ending inside a chunk, LegoLink-k ≥ chunk length (all
// recomputed, nothing linked); CacheBlend selection by deviation.
#include "kv/pic.h"

#include <gtest/gtest.h>

#include <numeric>

namespace keel::kv {
namespace {

std::vector<int32_t> range(int32_t a, int32_t b) {
  std::vector<int32_t> v(static_cast<size_t>(b - a));
  std::iota(v.begin(), v.end(), a);
  return v;
}
std::vector<int32_t> cat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PicTest, VariantNames) {
  for (const char* name : {"full", "naive", "legolink-1", "legolink-16", "cacheblend-15"}) {
    auto v = PicVariant::parse(name);
    ASSERT_TRUE(v.ok()) << name;
    EXPECT_EQ(v->name(), name);
  }
  EXPECT_EQ(PicVariant::parse("legolink-0")->mode, PicMode::kNaive);
  for (const char* bad : {"", "lego", "legolink-", "legolink-x", "legolink--1", "cacheblend-101",
                          "legolink-5000", "FULL"}) {
    EXPECT_FALSE(PicVariant::parse(bad).ok()) << bad;
  }
}

TEST(PicTest, ChunkValidation) {
  EXPECT_TRUE(validate_pic_chunks({}, 5).ok());
  const std::vector<PicChunk> ok = {{0, 2}, {2, 3}};
  EXPECT_TRUE(validate_pic_chunks(ok, 5).ok());
  EXPECT_FALSE(validate_pic_chunks(ok, 4).ok());  // leaves the prompt
  const std::vector<PicChunk> overlap = {{0, 3}, {2, 2}};
  EXPECT_FALSE(validate_pic_chunks(overlap, 9).ok());
  const std::vector<PicChunk> empty = {{1, 0}};
  EXPECT_FALSE(validate_pic_chunks(empty, 9).ok());
}

// A: [0, 10), gap [10, 12), B: [12, 22), C: [22, 30), query [30, 36).
const std::vector<PicChunk> kChunks = {{0, 10}, {12, 10}, {22, 8}};

TEST(PicTest, VariantsSplitThePrompt) {
  PicVariant v;
  v.mode = PicMode::kFull;
  PicLinkPlan p = plan_pic_link(36, 0, kChunks, v);
  EXPECT_EQ(p.linked_end, 0);
  EXPECT_TRUE(p.linked.empty() && p.recompute.empty());

  v = *PicVariant::parse("naive");
  p = plan_pic_link(36, 0, kChunks, v);
  EXPECT_EQ(p.linked_end, 30);
  EXPECT_EQ(p.recompute, range(10, 12));  // the gap only
  EXPECT_EQ(p.linked, cat(range(0, 10), range(12, 30)));
  EXPECT_EQ(p.blend_candidates, range(12, 30));  // not the leading chunk

  v = *PicVariant::parse("legolink-2");
  p = plan_pic_link(36, 0, kChunks, v);
  EXPECT_EQ(p.recompute, cat(cat(range(10, 14), {}), range(22, 24)));
  EXPECT_EQ(p.linked, cat(cat(range(0, 10), range(14, 22)), range(24, 30)));

  // A prefix hit covering A and part of the gap: nothing before it is touched.
  p = plan_pic_link(36, 11, kChunks, v);
  EXPECT_EQ(p.recompute, cat(range(11, 14), range(22, 24)));
  EXPECT_EQ(p.linked, cat(range(14, 22), range(24, 30)));
  // A hit past the chunks: nothing to link.
  EXPECT_EQ(plan_pic_link(36, 30, kChunks, v).linked_end, 30);
  EXPECT_TRUE(plan_pic_link(36, 30, kChunks, v).recompute.empty());
}

TEST(PicTest, PromptEndingInAChunkKeepsItsLastTokenForTheTail) {
  const PicVariant v = *PicVariant::parse("naive");
  const PicLinkPlan p = plan_pic_link(30, 0, kChunks, v);
  EXPECT_EQ(p.linked_end, 29);
  EXPECT_EQ(p.linked.back(), 28);
}

TEST(PicTest, LegoLinkCoveringWholeChunksLinksOnlyTheLeadingOne) {
  const PicVariant v = *PicVariant::parse("legolink-10");
  const PicLinkPlan p = plan_pic_link(36, 0, kChunks, v);
  EXPECT_EQ(p.linked, range(0, 10));
  EXPECT_EQ(p.recompute, range(10, 30));
}

TEST(PicTest, CacheBlendPicksTheLargestDeviations) {
  PicLinkPlan p = plan_pic_link(36, 0, kChunks, *PicVariant::parse("cacheblend-10"));
  EXPECT_EQ(p.recompute, range(10, 12));
  std::vector<float> dev(p.blend_candidates.size(), 0.0f);
  dev[3] = 5.0f;   // position 15
  dev[17] = 9.0f;  // position 29
  const std::vector<int32_t> pick = select_by_deviation(p.blend_candidates, dev, 10);
  EXPECT_EQ(pick, (std::vector<int32_t>{15, 29}));  // ceil(18 * 10%) = 2
  recompute_also(&p, pick);
  EXPECT_EQ(p.recompute, (std::vector<int32_t>{10, 11, 15, 29}));
  EXPECT_EQ(p.linked.size(), 26u);
  EXPECT_TRUE(select_by_deviation(p.blend_candidates, dev, 0).empty());
}

}  // namespace
}  // namespace keel::kv
