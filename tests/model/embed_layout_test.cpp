// EmbedLayout: stories260K's dimensions placed in TinyLlama's body and the small test shape —
// head and layer placement, block padding, the norm factors — and the shape checks' messages.
#include "model/embed_layout.h"

#include <gtest/gtest.h>

#include <cmath>

namespace keel::model {
namespace {

const EmbedDims kStories{64, 5, 8, 4, 8, 172};  // dim, layers, heads, KV heads, head size, FFN

ModelShape shape(const std::string& name) {
  auto s = find_model_shape(name);
  EXPECT_TRUE(s.has_value()) << name;
  return s.value_or(ModelShape{});
}

TEST(EmbedLayoutTest, TinyLlamaKeepsHeadSizeEightWithGroupsOfEight) {
  auto l = plan_embed_layout(kStories, shape("tinyllama-1.1b"), DType::kQ4_0, "stories260K.gguf");
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(l->wide.n_embd, 2048);
  EXPECT_EQ(l->wide.head_dim, 8);
  EXPECT_EQ(l->wide.n_head, 256);
  EXPECT_EQ(l->wide.n_head_kv, 32);  // TinyLlama's K/V width 4 × 64 at head size 8
  EXPECT_EQ(l->wide.n_ff, 5632);
  // Query head j → 8⌊j/2⌋ + (j mod 2); every other body head holds none.
  const std::vector<int64_t> expected = {0, 1, 8, 9, 16, 17, 24, 25};
  int64_t held = 0;
  for (int64_t j = 0; j < 8; ++j) {
    EXPECT_EQ(l->wide_head(j), expected[static_cast<size_t>(j)]);
    EXPECT_EQ(l->real_head(expected[static_cast<size_t>(j)]), j);
    // The real query head reads the body's KV head of the same index as stories260K's.
    EXPECT_EQ(l->wide_head(j) / l->wide.group(), j / kStories.group());
  }
  for (int64_t h = 0; h < 256; ++h) held += l->real_head(h) >= 0 ? 1 : 0;
  EXPECT_EQ(held, 8);
  // One real dimension in each 32-value block of the residual.
  EXPECT_EQ(l->embd_stride, 32);
  EXPECT_EQ(l->residual_slot(1), 32);
  EXPECT_EQ(l->real_dim(63 * 32), 63);
  EXPECT_EQ(l->real_dim(33), -1);
  EXPECT_EQ(l->embd_pad, 2048);  // the last slot's block ends the residual
  EXPECT_EQ(l->ff_pad, 192);     // 172 padded to a 32-value block
  EXPECT_FLOAT_EQ(l->norm_scale, std::sqrt(64.0f / 2048.0f));
  EXPECT_FLOAT_EQ(l->eps_scale, 64.0f / 2048.0f);
  // Real layers at ⌊i·22/5⌋: interleaved with identity layers, not followed by all of them.
  std::vector<int64_t> real_at;
  for (size_t i = 0; i < l->layer_source.size(); ++i) {
    if (l->layer_source[i] >= 0) {
      EXPECT_EQ(l->layer_source[i], static_cast<int64_t>(real_at.size()));
      real_at.push_back(static_cast<int64_t>(i));
    }
  }
  EXPECT_EQ(real_at, (std::vector<int64_t>{0, 4, 8, 13, 17}));
}

TEST(EmbedLayoutTest, KQuantsPackTheResidualAndPadToTheirSuperBlock) {
  auto l = plan_embed_layout(kStories, shape("tinyllama-1.1b"), DType::kQ4_K, "s");
  ASSERT_TRUE(l.ok()) << l.error().to_string();
  EXPECT_EQ(l->block, 256);
  EXPECT_EQ(l->embd_stride, 1);  // packed: whole sub-blocks of real values, whole ones of zeros
  EXPECT_EQ(l->embd_pad, 256);
  EXPECT_EQ(l->ff_pad, 256);
  // F32 bodies still pad to 32 (the blocks of Q8_0 activations and KV rows).
  auto f = plan_embed_layout(kStories, shape("tiny-gqa"), DType::kF32, "s");
  ASSERT_TRUE(f.ok()) << f.error().to_string();
  EXPECT_EQ(f->embd_stride, 4);
  EXPECT_EQ(f->embd_pad, 256);
  EXPECT_EQ(f->ff_pad, 192);
  EXPECT_EQ(f->wide.n_head, 32);
  EXPECT_EQ(f->wide.n_head_kv, 8);
  EXPECT_EQ(f->wide_head(3), 5);  // groups of 4: 4⌊3/2⌋ + 1
  EXPECT_EQ(f->real_head(2), -1);
}

TEST(EmbedLayoutTest, ANarrowerShapeIsRefused) {
  ModelShape s = shape("tiny-gqa");
  s.name = "narrow";
  s.n_embd = 32;
  auto l = plan_embed_layout(kStories, s, DType::kF32, "stories260K.gguf");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.error().message(), "shape 'narrow' is 32 wide, narrower than stories260K.gguf's 64");
}

TEST(EmbedLayoutTest, AHeadCountMismatchIsRefused) {
  ModelShape mha = shape("tiny-gqa");  // 4 heads of 64 over 4 KV heads: groups of 1 at size 8
  mha.name = "mha";
  mha.n_head_kv = 4;
  auto l = plan_embed_layout(kStories, mha, DType::kF32, "stories260K.gguf");
  ASSERT_FALSE(l.ok());
  EXPECT_EQ(l.error().message(),
            "head-count mismatch: shape 'mha' at head size 8 has 32 query heads over 32 KV heads "
            "(groups of 1); stories260K.gguf's 8 query heads over 4 KV heads (groups of 2) need "
            "at least 4 KV heads and whole groups of at least 2");
  ModelShape few = shape("tiny-gqa");  // 16 heads of 16 over 1 KV head: 2 KV heads at size 8
  few.name = "few-kv";
  few.n_head = 16;
  auto k = plan_embed_layout(kStories, few, DType::kF32, "stories260K.gguf");
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.error().message(),
            "head-count mismatch: shape 'few-kv' at head size 8 has 32 query heads over 2 KV "
            "heads (groups of 16); stories260K.gguf's 8 query heads over 4 KV heads (groups of 2) "
            "need at least 4 KV heads and whole groups of at least 2");
}

TEST(EmbedLayoutTest, OtherMisfitsNameTheirCause) {
  auto msg = [](const ModelShape& s, DType t) {
    auto l = plan_embed_layout(kStories, s, t, "stories260K.gguf");
    return l.ok() ? std::string("ok") : l.error().message();
  };
  EXPECT_EQ(msg(shape("tiny"), DType::kF32),
            "shape 'tiny' has 4 layers, fewer than stories260K.gguf's 5");
  EXPECT_EQ(msg(shape("qwen3moe-tiny"), DType::kF32),
            "shape 'qwen3moe-tiny' is a mixture of experts; --embed needs a dense shape");
  ModelShape ffn = shape("tiny-gqa");
  ffn.n_ff = 128;
  EXPECT_EQ(msg(ffn, DType::kF32),
            "shape 'tiny-gqa' has an FFN of 128, narrower than stories260K.gguf's 172");
  EXPECT_EQ(msg(shape("qwen2.5-0.5b"), DType::kQ4_K),
            "shape 'qwen2.5-0.5b' does not fit weight type Q4_K (256-value blocks)");
  ModelShape odd = shape("tiny-gqa");
  odd.n_embd = 260;
  odd.head_dim = 64;
  EXPECT_EQ(msg(odd, DType::kF32),
            "shape 'tiny-gqa' (width 260, K/V width 64) is not a multiple of stories260K.gguf's "
            "head size 8");
  EXPECT_EQ(msg(shape("qwen2.5-0.5b"), DType::kQ4_0), "ok");  // groups of 7, 16 KV heads
}

}  // namespace
}  // namespace keel::model
