// PrefixIndex tests: stores, removals per medium, clears, remove_te, best-tier counting, the
// longest leading run, bounded memory under repeated stores, unknown media; and the router's
// prompt block hashes equal to the keys the engine's KV cache manager publishes (also under a
// real model's identity when the shared models are present); LoRA adapters' blocks kept apart.
#include "cluster/job/prefix_index.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "engine/model_identity.h"
#include "gguf/reader.h"
#include "kv/kv_cache_manager.h"
#include "support/test_support.h"

namespace keel::cluster {
namespace {

KvEventBatch stored(std::vector<uint64_t> hashes, std::optional<std::string> medium = "pool") {
  BlockStored e;
  e.block_hashes = std::move(hashes);
  e.block_size = 16;
  e.medium = std::move(medium);
  return KvEventBatch{.ts = 1.0, .events = {e}};
}

KvEventBatch removed(std::vector<uint64_t> hashes, std::optional<std::string> medium = "pool") {
  return KvEventBatch{.ts = 2.0, .events = {BlockRemoved{std::move(hashes), std::move(medium)}}};
}

KvEventBatch cleared() { return KvEventBatch{.ts = 3.0, .events = {AllBlocksCleared{}}}; }

const std::vector<uint64_t> kPrompt = {11, 12, 13, 14, 15};

TEST(PrefixIndexTest, ParsesMedia) {
  EXPECT_EQ(parse_kv_medium(std::nullopt), KvTier::kPool);
  EXPECT_EQ(parse_kv_medium("pool"), KvTier::kPool);
  EXPECT_EQ(parse_kv_medium("dram"), KvTier::kDram);
  EXPECT_EQ(parse_kv_medium("disk"), KvTier::kDisk);
  EXPECT_FALSE(parse_kv_medium("GPU").has_value());
}

TEST(PrefixIndexTest, StoreThenMatchLongestLeadingRun) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-0", stored({11, 12, 14})).ok());  // 13 missing: run stops at 2
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{2, 2, 0}));
  EXPECT_EQ(index.match(kPrompt, "te-1"), PrefixMatch{});  // unknown TE
  ASSERT_TRUE(index.apply("te-0", stored({13})).ok());
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{4, 4, 0}));
  // A prompt whose first block is missing matches nothing, however much else is held.
  const std::vector<uint64_t> other = {99, 12, 13};
  EXPECT_EQ(index.match(other, "te-0").num_blocks, 0);
  EXPECT_EQ(index.num_blocks("te-0"), 4u);
}

TEST(PrefixIndexTest, MatchesSeveralTes) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("a", stored({11})).ok());
  ASSERT_TRUE(index.apply("b", stored({11, 12, 13})).ok());
  const std::vector<std::string> ids = {"a", "b", "c"};
  const std::vector<PrefixMatch> m = index.match(kPrompt, ids);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].num_blocks, 1);
  EXPECT_EQ(m[1].num_blocks, 3);
  EXPECT_EQ(m[2].num_blocks, 0);
}

TEST(PrefixIndexTest, BlocksCountAtTheirBestTier) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-0", stored({11, 12, 13}, "disk")).ok());
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{3, 0, 3}));
  ASSERT_TRUE(index.apply("te-0", stored({12}, "dram")).ok());
  ASSERT_TRUE(index.apply("te-0", stored({11}, std::nullopt)).ok());  // no medium: the pool
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{3, 1, 2}));
  // Evicting the pool copy leaves the disk copy: still matched, now as a lower-tier block.
  ASSERT_TRUE(index.apply("te-0", removed({11}, "pool")).ok());
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{3, 0, 3}));
  EXPECT_EQ(index.num_blocks("te-0"), 3u);
}

TEST(PrefixIndexTest, RemoveIsPerMedium) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-0", stored({11, 12})).ok());
  ASSERT_TRUE(index.apply("te-0", removed({12}, "dram")).ok());  // not held in dram: no change
  EXPECT_EQ(index.match(kPrompt, "te-0").num_blocks, 2);
  ASSERT_TRUE(index.apply("te-0", removed({12, 777})).ok());  // unknown hashes are ignored
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{1, 1, 0}));
  ASSERT_TRUE(index.apply("te-0", removed({11})).ok());
  EXPECT_EQ(index.num_blocks("te-0"), 0u);
  EXPECT_EQ(index.num_tes(), 0u);  // a TE with no blocks holds no memory
  // Removals for a TE never seen do not create it.
  ASSERT_TRUE(index.apply("ghost", removed({11})).ok());
  EXPECT_EQ(index.num_tes(), 0u);
}

TEST(PrefixIndexTest, ClearDropsOnlyThatTe) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-0", stored({11, 12})).ok());
  ASSERT_TRUE(index.apply("te-0", stored({13}, "disk")).ok());
  ASSERT_TRUE(index.apply("te-1", stored({11})).ok());
  ASSERT_TRUE(index.apply("te-0", cleared()).ok());
  EXPECT_EQ(index.match(kPrompt, "te-0"), PrefixMatch{});
  EXPECT_EQ(index.num_blocks("te-0"), 0u);
  EXPECT_EQ(index.match(kPrompt, "te-1").num_blocks, 1);
  EXPECT_EQ(index.num_tes(), 1u);
}

TEST(PrefixIndexTest, EventsApplyInOrderWithinABatch) {
  PrefixIndex index;
  KvEventBatch batch;
  batch.events.push_back(BlockStored{.block_hashes = {11, 12}, .medium = "pool"});
  batch.events.push_back(AllBlocksCleared{});
  batch.events.push_back(BlockStored{.block_hashes = {11}, .medium = "dram"});
  ASSERT_TRUE(index.apply("te-0", batch).ok());
  EXPECT_EQ(index.match(kPrompt, "te-0"), (PrefixMatch{1, 0, 1}));
}

TEST(PrefixIndexTest, RemoveTe) {
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-0", stored({11, 12})).ok());
  ASSERT_TRUE(index.apply("te-1", stored({11, 12})).ok());
  index.remove_te("te-0");
  index.remove_te("nobody");  // no-op
  EXPECT_EQ(index.match(kPrompt, "te-0").num_blocks, 0);
  EXPECT_EQ(index.match(kPrompt, "te-1").num_blocks, 2);
  EXPECT_EQ(index.num_tes(), 1u);
}

TEST(PrefixIndexTest, RepeatedStoresDoNotGrow) {
  PrefixIndex index;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(index.apply("te-0", stored({11, 12, 13})).ok());
    ASSERT_TRUE(index.apply("te-0", stored({11, 12, 13}, "disk")).ok());
  }
  EXPECT_EQ(index.num_blocks("te-0"), 3u);
  EXPECT_EQ(index.num_tes(), 1u);
}

TEST(PrefixIndexTest, UnknownMediumIsSkippedAndReported) {
  PrefixIndex index;
  KvEventBatch batch = stored({11}, "GPU");
  batch.events.push_back(BlockStored{.block_hashes = {12}, .medium = "pool"});
  const Status s = index.apply("te-0", batch);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("GPU"), std::string::npos) << s.to_string();
  EXPECT_EQ(index.num_blocks("te-0"), 1u);  // the pool event still applied
  EXPECT_EQ(index.match(std::vector<uint64_t>{12}, "te-0").num_blocks, 1);
}

// The router's prompt hashes are the `lo` halves of what the engine's KV cache manager publishes.
void expect_engine_hashes(const kv::BlockHash& model_key, std::string_view salt) {
  const int32_t block_size = 4;
  std::vector<int32_t> tokens(23);  // 5 full blocks and a partial one
  std::iota(tokens.begin(), tokens.end(), 100);
  const kv::BlockHash extra = kv::request_extra_key(model_key, salt);

  kv::KvCacheManager manager(kv::KvCacheConfig{.num_blocks = 16, .block_size = block_size});
  ASSERT_TRUE(manager.allocate(1, static_cast<int32_t>(tokens.size())).has_value());
  manager.publish_full_blocks(1, tokens, static_cast<int32_t>(tokens.size()), extra);

  const std::vector<uint64_t> ours = prompt_block_hashes(model_key, salt, tokens, block_size);
  ASSERT_EQ(ours.size(), 5u);
  const std::span<const kv::BlockId> table = manager.block_table(1);
  for (size_t i = 0; i < ours.size(); ++i) {
    const kv::BlockHash* published = manager.pool().hash_of(table[i]);
    ASSERT_NE(published, nullptr) << "block " << i;
    EXPECT_EQ(ours[i], published->lo) << "block " << i;
  }
  // And what model_identity.h documents for routers.
  const std::vector<kv::BlockHash> documented =
      engine::prefix_block_hashes(model_key, salt, tokens, block_size);
  ASSERT_EQ(documented.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(ours[i], documented[i].lo);
  // Another salt keys other blocks.
  const std::vector<uint64_t> salted =
      prompt_block_hashes(model_key, "other-tenant", tokens, block_size);
  EXPECT_NE(salted.front(), ours.front());
}

TEST(PromptBlockHashesTest, EqualTheEnginesPublishedKeys) {
  expect_engine_hashes(kv::BlockHash{0x1234, 0x5678}, "");
  expect_engine_hashes(kv::BlockHash{0x1234, 0x5678}, "tenant-a");
}

TEST(PromptBlockHashesTest, EqualTheEnginesUnderARealModelIdentity) {
  KEEL_REQUIRE_SHARED();
  auto meta = gguf::GgufFile::open(testing::shared_path("models/stories260K/stories260K.gguf"),
                                   {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(meta.ok()) << meta.error().to_string();
  auto id = engine::model_identity(*meta);
  ASSERT_TRUE(id.ok()) << id.error().to_string();
  expect_engine_hashes(*id, "salt");
}

// A LoRA request's blocks are published under lora_prefix_key (the engine's Engine::extra_key):
// the index holds them apart from the base model's and other adapters' blocks of the same tokens.
TEST(PromptBlockHashesTest, LoraBlocksNeverMatchTheBaseModelsOrAnotherAdapters) {
  const kv::BlockHash model_key{0x1234, 0x5678};
  const kv::BlockHash lora_a = engine::lora_prefix_key(model_key, {1, 2});
  const kv::BlockHash lora_b = engine::lora_prefix_key(model_key, {1, 3});
  EXPECT_EQ(lora_a, engine::lora_prefix_key(model_key, {1, 2}));
  EXPECT_NE(lora_a, lora_b);
  EXPECT_NE(lora_a, engine::lora_prefix_key(kv::BlockHash{0x1234, 0x5679}, {1, 2}));
  std::vector<int32_t> tokens(64);
  std::iota(tokens.begin(), tokens.end(), 7);
  PrefixIndex index;
  ASSERT_TRUE(index.apply("te-lora", stored(prompt_block_hashes(lora_a, "", tokens, 16))).ok());
  ASSERT_TRUE(index.apply("te-base", stored(prompt_block_hashes(model_key, "", tokens, 16))).ok());
  const auto base = prompt_block_hashes(model_key, "", tokens, 16);
  const auto a = prompt_block_hashes(lora_a, "", tokens, 16);
  const auto b = prompt_block_hashes(lora_b, "", tokens, 16);
  EXPECT_EQ(index.match(a, "te-lora").num_blocks, 4);
  EXPECT_EQ(index.match(base, "te-lora").num_blocks, 0);
  EXPECT_EQ(index.match(b, "te-lora").num_blocks, 0);
  EXPECT_EQ(index.match(a, "te-base").num_blocks, 0);
  EXPECT_EQ(index.match(base, "te-base").num_blocks, 4);
}

TEST(PromptBlockHashesTest, OnlyFullBlocks) {
  const std::vector<int32_t> tokens = {1, 2, 3};
  EXPECT_TRUE(prompt_block_hashes(kv::kRootHash, "", tokens, 4).empty());
  EXPECT_EQ(prompt_block_hashes(kv::kRootHash, "", tokens, 3).size(), 1u);
  EXPECT_EQ(prompt_block_hashes(kv::kRootHash, "", tokens, 1).size(), 3u);
}

}  // namespace
}  // namespace keel::cluster
