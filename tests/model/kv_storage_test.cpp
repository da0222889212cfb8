// KvLayout / KvStorage: sizes and offsets as section A of the design fixes them, sizing errors,
// blocks_for_bytes, block addresses, the kernels' per-layer view, and copy_block copying every
// layer's K and V rows of a block and nothing else; row addressing and conversion; Q8_0 rows (34
// bytes per 32 values, 0.53x of f16 per token; kv_dim not a multiple of 32 refused; a row read
// back within half a quantization step, and bytes unchanged when written again).
#include "model/kv_storage.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/fp16.h"

namespace keel::model {
namespace {

TEST(KvLayoutTest, SizesAndOffsetsFollowTheBlockMajorFormula) {
  const KvLayout l{3, 10, 4, DType::kF16};
  EXPECT_EQ(l.row_bytes(), 20u);
  EXPECT_EQ(l.block_bytes(), 3u * 2 * 4 * 20);
  // layer l, K row p: ((l*2 + 0)*block_size + p) * row_bytes; V: (l*2 + 1).
  EXPECT_EQ(l.k_offset(0), 0u);
  EXPECT_EQ(l.v_offset(0), 4u * 20);
  EXPECT_EQ(l.k_offset(2), (2u * 2 * 4) * 20);
  EXPECT_EQ(l.v_offset(2), (2u * 2 + 1) * 4 * 20);
  EXPECT_EQ((KvLayout{3, 10, 4, DType::kF32}.block_bytes()), 2 * l.block_bytes());

  HParams hp;
  hp.n_layer = 5;
  hp.n_head = 8;
  hp.n_head_kv = 4;
  hp.head_dim = 8;
  const KvLayout m = KvLayout::for_model(hp, 16, DType::kF32);
  EXPECT_EQ(m.n_layer, 5);
  EXPECT_EQ(m.kv_dim, 32);
  EXPECT_EQ(m.block_size, 16);
  EXPECT_EQ(m.dtype, DType::kF32);
}

TEST(KvStorageTest, RejectsBadLayoutsAndCounts) {
  auto s = KvStorage::create(KvLayout{0, 8, 16, DType::kF32}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(),
            "KV layout dimensions must be positive: n_layer 0, kv_dim 8, block_size 16");
  s = KvStorage::create(KvLayout{2, 8, 0, DType::kF32}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("block_size 0"));
  s = KvStorage::create(KvLayout{2, 8, 16, DType::kQ4_0}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(), "KV type Q4_0 is not supported (expected F32, F16 or Q8_0)");
  s = KvStorage::create(KvLayout{2, 40, 16, DType::kQ8_0}, 4);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("blocks of 32 values"));
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("has 40 values"));
  s = KvStorage::create(KvLayout{2, 8, 16, DType::kF32}, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.error().message(), "KV storage needs at least one block, got 0");
  s = KvStorage::create(KvLayout{int64_t{1} << 30, int64_t{1} << 30, 1 << 30, DType::kF32}, 1);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("KV block size overflows"));
  // A block of 2^40 bytes is a valid layout; 2^30 of them overflow 64-bit sizes.
  s = KvStorage::create(KvLayout{1 << 10, 1 << 13, 1 << 14, DType::kF32}, 1 << 30);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(s.error().message(), ::testing::HasSubstr("KV storage size overflows"));
}

TEST(KvStorageTest, BlocksForBytes) {
  const KvLayout l{2, 4, 4, DType::kF32};  // 256-byte blocks
  ASSERT_EQ(l.block_bytes(), 256u);
  EXPECT_EQ(KvStorage::blocks_for_bytes(l, 0), 0);
  EXPECT_EQ(KvStorage::blocks_for_bytes(l, 255), 0);
  EXPECT_EQ(KvStorage::blocks_for_bytes(l, 256), 1);
  EXPECT_EQ(KvStorage::blocks_for_bytes(l, 256 * 10 + 100), 10);
  EXPECT_EQ(KvStorage::blocks_for_bytes(l, std::numeric_limits<size_t>::max()),
            std::numeric_limits<int32_t>::max());
  EXPECT_EQ(KvStorage::blocks_for_bytes(KvLayout{0, 8, 4, DType::kF32}, 1 << 20), 0);
  auto s = KvStorage::create(l, KvStorage::blocks_for_bytes(l, 256 * 10 + 100));
  ASSERT_TRUE(s.ok());
  EXPECT_LE(s->bytes(), size_t{256 * 10 + 100});
}

TEST(KvStorageTest, BlocksAndLayerViews) {
  const KvLayout l{3, 6, 4, DType::kF16};
  auto s = KvStorage::create(l, 5);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->num_blocks(), 5);
  EXPECT_EQ(s->bytes(), 5 * l.block_bytes());
  for (int32_t b = 0; b < 5; ++b) {
    EXPECT_EQ(s->block(b) - s->block(0), static_cast<ptrdiff_t>(b * l.block_bytes()));
    for (size_t i = 0; i < l.block_bytes(); ++i) ASSERT_EQ(s->block(b)[i], std::byte{0});
  }
  const kernels::PagedKv kv = s->paged(2);
  EXPECT_EQ(kv.base, s->block(0) + l.k_offset(2));
  EXPECT_EQ(kv.base + kv.v_offset, s->block(0) + l.v_offset(2));
  EXPECT_EQ(kv.block_stride, l.block_bytes());
  EXPECT_EQ(kv.block_size, 4);
  EXPECT_EQ(kv.kv_dim, 6);
  EXPECT_EQ(kv.dtype, DType::kF16);
}

TEST(KvStorageTest, RowsAreAddressedByBlockLayerAndRowAndConverted) {
  const KvLayout l{3, 6, 4, DType::kF16};
  auto s = KvStorage::create(l, 5);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  EXPECT_EQ(s->k_row(3, 2, 1), s->block(3) + l.k_offset(2) + 1 * l.row_bytes());
  EXPECT_EQ(s->v_row(3, 2, 1), s->block(3) + l.v_offset(2) + 1 * l.row_bytes());
  const KvStorage& cs = *s;
  EXPECT_EQ(cs.k_row(4, 0, 3), s->block(4) + 3 * l.row_bytes());
  EXPECT_EQ(cs.v_row(0, 1, 0), s->block(0) + l.v_offset(1));
  const float in[6] = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, 3.0f};
  s->write_row(in, s->v_row(2, 1, 2));
  float out[6];
  s->read_row(s->v_row(2, 1, 2), out);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], fp16_to_fp32(fp32_to_fp16(in[i]))) << i;
  EXPECT_NE(out[2], in[2]);  // really rounded to f16
}

TEST(KvLayoutTest, Q8RowsAre34BytesPer32ValuesAndAbout053xOfF16) {
  const KvLayout q8{22, 256, 16, DType::kQ8_0};  // TinyLlama-1.1B: 22 layers, 4 KV heads of 64
  const KvLayout f16{22, 256, 16, DType::kF16};
  EXPECT_EQ(q8.row_bytes(), 8u * 34);
  EXPECT_EQ(q8.bytes_per_token(), 22u * 2 * 8 * 34);
  EXPECT_EQ(f16.bytes_per_token(), 22u * 2 * 512);
  EXPECT_LE(static_cast<double>(q8.bytes_per_token()) / static_cast<double>(f16.bytes_per_token()),
            0.55);
  EXPECT_EQ(q8.block_bytes(), 16 * q8.bytes_per_token());
  EXPECT_EQ(q8.v_offset(1) - q8.k_offset(1), 16 * q8.row_bytes());
}

TEST(KvStorageTest, Q8RowsRoundTripWithinHalfAStep) {
  const KvLayout l{2, 64, 4, DType::kQ8_0};
  auto s = KvStorage::create(l, 3);
  ASSERT_TRUE(s.ok()) << s.error().to_string();
  std::vector<float> in(64), out(64);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;
  in[40] = 50.0f;  // the second block's scale is much coarser than the first's
  s->write_row(in.data(), s->k_row(1, 1, 3));
  s->read_row(s->k_row(1, 1, 3), out.data());
  for (size_t b = 0; b < 2; ++b) {
    float amax = 0.0f;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) amax = std::max(amax, std::fabs(in[i]));
    const float step = amax / 127.0f;
    for (size_t i = 32 * b; i < 32 * b + 32; ++i) {
      EXPECT_LE(std::fabs(out[i] - in[i]), 0.5f * step * 1.01f) << i;
    }
  }
  EXPECT_NE(out[1], in[1]);  // really quantized
  // Quantizing what was read back gives the same bytes (what a relocation or a tier copy keeps).
  std::vector<std::byte> again(l.row_bytes());
  s->write_row(out.data(), again.data());
  EXPECT_EQ(std::memcmp(again.data(), s->k_row(1, 1, 3), l.row_bytes()), 0);
  // Neighbouring rows are untouched.
  for (size_t i = 0; i < l.row_bytes(); ++i) {
    ASSERT_EQ(s->k_row(1, 1, 2)[i], std::byte{0});
    ASSERT_EQ(s->v_row(1, 1, 0)[i], std::byte{0});
  }
}

TEST(KvStorageTest, CopyBlockCopiesEveryLayersKeysAndValues) {
  const KvLayout l{3, 5, 4, DType::kF32};
  auto s = KvStorage::create(l, 4);
  ASSERT_TRUE(s.ok());
  // Tag every element of every block: value = block*10000 + layer*1000 + (V ? 500 : 0) + index.
  const auto tag = [&](int32_t b, int64_t layer, bool v, size_t i) {
    return static_cast<float>(b * 10000 + layer * 1000 + (v ? 500 : 0)) + static_cast<float>(i);
  };
  const size_t per = static_cast<size_t>(l.block_size * l.kv_dim);
  for (int32_t b = 0; b < 4; ++b) {
    for (int64_t layer = 0; layer < 3; ++layer) {
      for (bool v : {false, true}) {
        auto* p =
            reinterpret_cast<float*>(s->block(b) + (v ? l.v_offset(layer) : l.k_offset(layer)));
        for (size_t i = 0; i < per; ++i) p[i] = tag(b, layer, v, i);
      }
    }
  }
  s->copy_block(3, 1);
  s->copy_block(2, 2);  // no-op
  for (int32_t b = 0; b < 4; ++b) {
    const int32_t want = b == 1 ? 3 : b;
    for (int64_t layer = 0; layer < 3; ++layer) {
      for (bool v : {false, true}) {
        const auto* p = reinterpret_cast<const float*>(s->block(b) +
                                                       (v ? l.v_offset(layer) : l.k_offset(layer)));
        for (size_t i = 0; i < per; ++i) {
          ASSERT_EQ(p[i], tag(want, layer, v, i))
              << "block " << b << " layer " << layer << (v ? " V" : " K") << " element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace keel::model
