// A Q8_0 KV cache through the engine with a real model (stories260K): greedy output close to f32
// KV (criterion below); blocks evicted to the host tier and brought back hold the same bytes
// they were computed with; the disk tier serves Q8_0 blocks across a restart to a Q8_0 engine and
// never to an F16 engine over the same directory (the tier identity includes the KV type); blocks
// read out of a Q8_0 prefill engine and filed in a Q8_0 decode engine are fetched, not
// recomputed; the engine identity differs from the F16 engine's. Head dims: stories260K's KV row
// is 4 heads × 8 = 32 values, one Q8_0 block; a model whose KV row is not a multiple of 32 is
// refused at start with a clear error (tested in tests/model/kv_storage_test.cpp).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model_identity.h"
#include "engine_test_util.h"
#include "tier_test_util.h"

namespace keel::engine {
namespace {

// 12 Q8_0 blocks (stories260K: 5 layers, a 32-value KV row = one 34-byte Q8_0 block).
EngineConfig q8_pool_config() { return small_pool_config(DType::kQ8_0, 34); }

std::vector<std::vector<std::byte>> read_blocks(Engine& e, const std::vector<kv::BlockHash>& hs) {
  std::vector<std::vector<std::byte>> out;
  for (const kv::BlockHash& h : hs) {
    out.emplace_back(e.kv_block_bytes());
    EXPECT_TRUE(e.kv_connector().read_block(h, out.back()).ok());
  }
  return out;
}

// Criterion: the first 16 of the reference's 32 greedy ids (llama.cpp, f32 KV) are equal for the
// first prompt — the same prompt F16KvCacheStaysClose checks for all 32.
TEST(EngineKvQ8Test, GreedyOutputStaysCloseToF32Kv) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = base_config();
  c.kv_dtype = DType::kQ8_0;
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ((*e)->kv_block_bytes(), size_t{5} * 2 * 16 * 34);
  const std::vector<int32_t> got = run_one(**e, greedy({1, 403, 407, 261, 378}, 32));
  const auto ref = nlohmann::json::parse(
      testing::read_file(testing::shared_path("models/stories260K/reference/greedy.json")));
  auto want = ref["results"][0]["gen_ids"].get<std::vector<int32_t>>();
  want.resize(16);
  ASSERT_EQ(got.size(), 32u);
  EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 16), want);
}

TEST(EngineKvQ8Test, HostTierBringsBackTheSameBytes) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = q8_pool_config();
  c.kv_host_bytes = 64 << 20;
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  Engine& engine = **e;
  ASSERT_EQ(engine.num_kv_blocks(), 12);
  const std::vector<int32_t> want = run_one(engine, greedy(prompt(300), 8));
  const std::vector<kv::BlockHash> hashes =
      prefix_block_hashes(engine.model_key(), "", prompt(300), kBlock);
  const auto before = read_blocks(engine, {hashes.begin(), hashes.begin() + 3});
  churn(engine);
  EXPECT_GT(engine.stats().host_tier.blocks, 0);
  const int64_t hits_before = engine.stats().host_tier.hits;
  auto again = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine.submit(greedy(prompt(300), 8), again).ok());
  EXPECT_EQ(again->wait(), want);
  EXPECT_EQ(again->cached(), 3 * kBlock);
  EXPECT_GE(engine.stats().host_tier.hits - hits_before, 3);  // from T1: the pool lost them
  EXPECT_EQ(read_blocks(engine, {hashes.begin(), hashes.begin() + 3}), before);
}

TEST(EngineKvQ8Test, DiskTierServesQ8BlocksOnlyToQ8Engines) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = q8_pool_config();
  c.kv_disk_dir = testing::make_temp_dir("engine_kv_q8_disk");
  c.kv_disk_bytes = 64 << 20;
  std::vector<int32_t> want;
  {
    auto e = Engine::start(*model, c);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    want = run_one(**e, greedy(prompt(300), 8));
    churn(**e);
    EXPECT_GT((*e)->stats().disk_tier.blocks, 0);
  }
  {  // an F16 engine over the same directory: another identity, nothing is read
    EngineConfig f16 = c;
    f16.kv_dtype = DType::kF16;
    auto e = Engine::start(*model, f16);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), sink).ok());
    sink->wait();
    EXPECT_EQ(sink->cached(), 0);
    EXPECT_EQ((*e)->stats().disk_tier.hits, 0);
  }
  auto e = Engine::start(*model, c);  // a Q8_0 restart: the blocks come from disk
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy(prompt(300), 8), sink).ok());
  EXPECT_EQ(sink->wait(), want);
  EXPECT_EQ(sink->cached(), 3 * kBlock);
  EXPECT_GE((*e)->stats().disk_tier.hits, 3);
}

TEST(EngineKvQ8Test, PeerBlocksAreFetchedAndIdentityNamesTheKvType) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = q8_pool_config();
  c.kv_host_bytes = 64 << 20;
  auto prefill = Engine::start(*model, c);
  ASSERT_TRUE(prefill.ok()) << prefill.error().to_string();
  const std::vector<int32_t> want = run_one(**prefill, greedy(prompt(300), 8));
  const std::vector<kv::BlockHash> hashes =
      prefix_block_hashes((*prefill)->model_key(), "", prompt(300), kBlock);
  const auto blocks = read_blocks(**prefill, hashes);
  auto decode = Engine::start(*model, c);
  ASSERT_TRUE(decode.ok()) << decode.error().to_string();
  EXPECT_EQ((*decode)->kv_connector().kv_identity(), (*prefill)->kv_connector().kv_identity());
  for (size_t i = 0; i < hashes.size(); ++i) {
    ASSERT_TRUE((*decode)->kv_connector().accept_block(hashes[i], blocks[i]).ok());
  }
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*decode)->submit(greedy(prompt(300), 8), sink).ok());
  EXPECT_EQ(sink->wait(), want);
  EXPECT_EQ(sink->cached(), 3 * kBlock);
  // An F16 engine of the same model has another identity (its transfer server refuses Q8_0
  // frames: tests/cluster/kv_transfer_test.cpp) and another block size in bytes.
  EngineConfig f16 = c;
  f16.kv_dtype = DType::kF16;
  f16.kv_cache_bytes = 0;
  auto other = Engine::start(*model, f16);
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  EXPECT_NE((*other)->kv_connector().kv_identity(), (*prefill)->kv_connector().kv_identity());
  EXPECT_EQ((*other)->kv_connector().kv_identity(),
            kv_tier_identity((*prefill)->model_key(), DType::kF16, kBlock));
  EXPECT_NE((*other)->kv_block_bytes(), (*prefill)->kv_block_bytes());
  EXPECT_EQ((*other)->kv_connector().accept_block(hashes[0], blocks[0]).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::engine
