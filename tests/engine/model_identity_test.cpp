// Model identity from the GGUF metadata alone: a file opened without its tensor bytes
// (DataMode::kNone) yields the same identity as the engine serving the loaded model, so a router
// computes the engines' prefix-block keys; the identity depends on the tensors' layout; the block
// keys chain as the KV cache manager's do; derived keys differ per KV dtype and block size.
#include "engine/model_identity.h"

#include <gtest/gtest.h>

#include "engine_test_util.h"
#include "kv/block_file.h"

namespace keel::engine {
namespace {

std::string stories_path() { return testing::shared_path("models/stories260K/stories260K.gguf"); }

TEST(ModelIdentityTest, MetadataOnlyOpenEqualsTheEngines) {
  KEEL_REQUIRE_SHARED();
  auto meta = gguf::GgufFile::open(stories_path(), {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(meta.ok()) << meta.error().to_string();
  auto id = model_identity(*meta);
  ASSERT_TRUE(id.ok()) << id.error().to_string();

  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto engine = Engine::start(*model, base_config());
  ASSERT_TRUE(engine.ok()) << engine.error().to_string();
  EXPECT_EQ(kv::block_hash_hex((*engine)->model_key()), kv::block_hash_hex(*id));
  EXPECT_NE(*id, kv::kRootHash);
}

TEST(ModelIdentityTest, DependsOnTheTensorLayout) {
  KEEL_REQUIRE_SHARED();
  auto meta = gguf::GgufFile::open(stories_path(), {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(meta.ok());
  const kv::BlockHash id = *model_identity(*meta);
  // The same metadata read again: the same identity (no seeds, no addresses).
  auto again = gguf::GgufFile::open(stories_path(), {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*model_identity(*again), id);
  // A different model file (a shared vocabulary with other tensors) has another identity.
  auto vocab = gguf::GgufFile::open(testing::shared_path("vocab/ggml-vocab-llama-spm.gguf"),
                                    {.mode = gguf::DataMode::kNone});
  ASSERT_TRUE(vocab.ok());
  auto other = model_identity(*vocab);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, id);
}

TEST(ModelIdentityTest, PrefixBlockKeysChainUnderTheSaltedExtraKey) {
  const kv::BlockHash model{0x1234, 0x5678};
  std::vector<int32_t> tokens(40);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i + 3);
  const std::vector<kv::BlockHash> keys = prefix_block_hashes(model, "tenant", tokens, 16);
  ASSERT_EQ(keys.size(), 2u);  // the partial third block has no key
  const kv::BlockHash extra = kv::request_extra_key(model, "tenant");
  const kv::BlockHash first =
      kv::hash_block(kv::kRootHash, std::span<const int32_t>(tokens).first(16), extra);
  EXPECT_EQ(keys[0], first);
  EXPECT_EQ(keys[1],
            kv::hash_block(first, std::span<const int32_t>(tokens).subspan(16, 16), extra));
  // Another salt: other keys everywhere.
  const std::vector<kv::BlockHash> other = prefix_block_hashes(model, "", tokens, 16);
  EXPECT_NE(other[0], keys[0]);
  EXPECT_NE(other[1], keys[1]);
  EXPECT_TRUE(prefix_block_hashes(model, "", tokens, 0).empty());
}

TEST(ModelIdentityTest, DerivedKeysSeparateKvLayouts) {
  const kv::BlockHash model{1, 2};
  const kv::BlockHash f32 = kv_tier_identity(model, DType::kF32, 16);
  EXPECT_NE(f32, kv_tier_identity(model, DType::kF16, 16));
  EXPECT_NE(f32, kv_tier_identity(model, DType::kQ8_0, 16));
  EXPECT_NE(kv_tier_identity(model, DType::kF16, 16), kv_tier_identity(model, DType::kQ8_0, 16));
  EXPECT_NE(f32, kv_tier_identity(model, DType::kF32, 32));
  EXPECT_NE(f32, kv_tier_identity(kv::BlockHash{1, 3}, DType::kF32, 16));
  EXPECT_NE(pic_chunk_root(model), model);
  EXPECT_NE(pic_chunk_root(model), pic_chunk_root(kv::BlockHash{1, 3}));
}

}  // namespace
}  // namespace keel::engine
