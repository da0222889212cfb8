// cp_message: a KV shard and an attention state survive the trip byte for byte, and a message
// that is not what the receiver expects is Corrupt, never read past its end.
#include "model/cp_message.h"

#include <gtest/gtest.h>

#include <cstring>

namespace keel::model {
namespace {

KvStorage storage(DType type) {
  KvLayout layout;
  layout.n_layer = 2;
  layout.kv_dim = 64;
  layout.block_size = 16;
  layout.dtype = type;
  auto kv = KvStorage::create(layout, 4);
  EXPECT_TRUE(kv.ok());
  return std::move(*kv);
}

TEST(CpMessageTest, KvShardRoundTripsOneLayerOfTheSlotsInBlockOrder) {
  KvStorage kv = storage(DType::kF16);
  std::vector<float> row(64);
  const std::vector<int32_t> table = {3, 1};  // slots 0..15 in block 3, 16..19 in block 1
  for (int32_t s = 0; s < 20; ++s) {
    for (int i = 0; i < 64; ++i) row[static_cast<size_t>(i)] = static_cast<float>(s * 100 + i);
    kv.write_row(row.data(), kv.k_row(table[static_cast<size_t>(s / 16)], 1, s % 16));
    for (float& x : row) x = -x;
    kv.write_row(row.data(), kv.v_row(table[static_cast<size_t>(s / 16)], 1, s % 16));
  }
  std::vector<int32_t> positions(20);
  for (int32_t s = 0; s < 20; ++s) positions[static_cast<size_t>(s)] = 7 + 3 * s;
  const CpMessage msg = pack_kv_shard(kv, 1, table, positions);
  auto view = view_kv_shard(msg, kv.layout(), 1);
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  EXPECT_EQ(view->n_blocks, 2);
  ASSERT_EQ(view->positions.size(), 20u);
  EXPECT_EQ(view->positions[19], 7 + 57);
  const size_t rb = kv.layout().row_bytes();
  for (int32_t s = 0; s < 20; ++s) {
    const std::byte* k = view->kv.base + static_cast<size_t>(s / 16) * view->kv.block_stride +
                         static_cast<size_t>(s % 16) * rb;
    EXPECT_EQ(std::memcmp(k, kv.k_row(table[static_cast<size_t>(s / 16)], 1, s % 16), rb), 0);
    EXPECT_EQ(std::memcmp(k + view->kv.v_offset,
                          kv.v_row(table[static_cast<size_t>(s / 16)], 1, s % 16), rb),
              0);
  }
}

TEST(CpMessageTest, AMessageOfAnotherLayerTypeOrSizeIsCorrupt) {
  KvStorage kv = storage(DType::kF16);
  const std::vector<int32_t> table = {0};
  const std::vector<int32_t> positions = {0, 1, 2};
  const CpMessage msg = pack_kv_shard(kv, 0, table, positions);
  EXPECT_EQ(view_kv_shard(msg, kv.layout(), 1).status().code(), StatusCode::kCorrupt);
  KvLayout q8 = kv.layout();
  q8.dtype = DType::kQ8_0;
  EXPECT_EQ(view_kv_shard(msg, q8, 0).status().code(), StatusCode::kCorrupt);
  auto cut = std::make_shared<std::vector<std::byte>>(msg->begin(), msg->end() - 1);
  EXPECT_EQ(view_kv_shard(cut, kv.layout(), 0).status().code(), StatusCode::kCorrupt);
  auto bad = std::make_shared<std::vector<std::byte>>(*msg);
  (*bad)[0] = std::byte{0};
  EXPECT_EQ(view_kv_shard(bad, kv.layout(), 0).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(view_kv_shard(nullptr, kv.layout(), 0).status().code(), StatusCode::kCorrupt);
  // A state is not a KV shard.
  const float acc[4] = {1, 2, 3, 4}, m[2] = {0, 1}, l[2] = {1, 1};
  const CpMessage state = pack_attention_state(0, {1, 2, 2, acc, m, l});
  EXPECT_EQ(view_kv_shard(state, kv.layout(), 0).status().code(), StatusCode::kCorrupt);
}

TEST(CpMessageTest, AttentionStateRoundTripsAndChecksItsSizes) {
  std::vector<float> acc(3 * 4 * 8), m(3 * 4), l(3 * 4);
  for (size_t i = 0; i < acc.size(); ++i) acc[i] = static_cast<float>(i) * 0.5f;
  for (size_t i = 0; i < m.size(); ++i) m[i] = -static_cast<float>(i), l[i] = 1.0f + i;
  const CpMessage msg = pack_attention_state(5, {3, 4, 8, acc.data(), m.data(), l.data()});
  auto v = view_attention_state(msg, 5, 3, 4, 8);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  EXPECT_EQ(std::memcmp(v->acc, acc.data(), acc.size() * 4), 0);
  EXPECT_EQ(std::memcmp(v->m, m.data(), m.size() * 4), 0);
  EXPECT_EQ(std::memcmp(v->l, l.data(), l.size() * 4), 0);
  EXPECT_EQ(view_attention_state(msg, 4, 3, 4, 8).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(view_attention_state(msg, 5, 2, 4, 8).status().code(), StatusCode::kCorrupt);
  EXPECT_EQ(view_attention_state(msg, 5, 3, 4, 16).status().code(), StatusCode::kCorrupt);
}

TEST(CpMessageTest, TokensRoundTripAndAreNotAnotherKind) {
  const std::vector<int32_t> tokens = {5, 70000, 3};
  auto got = view_tokens(pack_tokens(tokens));
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, tokens);
  const float acc[4] = {1, 2, 3, 4}, m[2] = {0, 1}, l[2] = {1, 1};
  EXPECT_EQ(view_tokens(pack_attention_state(0, {1, 2, 2, acc, m, l})).status().code(),
            StatusCode::kCorrupt);
  auto cut = pack_tokens(tokens);
  auto shorter = std::make_shared<std::vector<std::byte>>(cut->begin(), cut->end() - 4);
  EXPECT_EQ(view_tokens(shorter).status().code(), StatusCode::kCorrupt);
}

}  // namespace
}  // namespace keel::model
