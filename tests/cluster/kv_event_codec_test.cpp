// The KV event codec against vLLM's layout: golden bytes for each event type written by hand from
// msgspec's array_like encoding (tag first, fields in declaration order, smallest integer forms,
// float64 ts, the batch's rank omitted when none), round trips, what msgspec also accepts, and
// malformed inputs that must give InvalidArgument.
#include "cluster/kv_events/kv_event_codec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace keel::cluster {
namespace {

void append_str(Bytes& b, const std::string& s) {
  b.push_back(static_cast<uint8_t>(0xa0 | s.size()));  // fixstr (every tag is < 32 bytes)
  b.insert(b.end(), s.begin(), s.end());
}

Bytes concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Bytes str(const std::string& s) {
  Bytes b;
  append_str(b, s);
  return b;
}

Status decode_error(const Bytes& b) {
  Result<KvEventBatch> r = decode_kv_event_batch(b);
  EXPECT_FALSE(r.ok());
  return r.ok() ? Status::ok_status() : r.error();
}

TEST(KvEventCodecTest, BlockStoredGoldenBytes) {
  KvEventBatch batch;
  batch.ts = 1.5;
  batch.events.emplace_back(BlockStored{
      {1, 0xFFFFFFFFFFFFFFFFull}, std::nullopt, {1, 2, -1, 300}, 2, std::nullopt, "pool"});
  batch.data_parallel_rank = 0;
  const Bytes want = concat({
      {0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0},  // [ts = 1.5 (float64),
      {0x91, 0x97},                                // [[ 7 fields:
      str("BlockStored"),
      {0x92, 0x01, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},  // hashes
      {0xc0},                                                              // parent: None
      {0x94, 0x01, 0x02, 0xff, 0xcd, 0x01, 0x2c},                          // tokens
      {0x02, 0xc0},                                                        // block_size, lora
      str("pool"),                                                         // medium ]],
      {0x00},                                                              // rank 0]
  });
  EXPECT_EQ(encode_kv_event_batch(batch), want);
  Result<KvEventBatch> back = decode_kv_event_batch(want);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, batch);
}

TEST(KvEventCodecTest, BlockStoredWithParentAndLoraGoldenBytes) {
  KvEventBatch batch;
  batch.ts = -2.0;
  batch.events.emplace_back(BlockStored{{0x1234}, 5, {}, 16, 7, std::nullopt});
  const Bytes want = concat({
      {0x92, 0xcb, 0xc0, 0x00, 0, 0, 0, 0, 0, 0, 0x91, 0x97},  // no rank: a 2-field batch
      str("BlockStored"),
      {0x91, 0xcd, 0x12, 0x34, 0x05, 0x90, 0x10, 0x07, 0xc0},
  });
  EXPECT_EQ(encode_kv_event_batch(batch), want);
  Result<KvEventBatch> back = decode_kv_event_batch(want);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, batch);
}

TEST(KvEventCodecTest, BlockRemovedGoldenBytes) {
  KvEventBatch batch;
  batch.ts = 0.0;
  batch.events.emplace_back(BlockRemoved{{256, 70000}, std::nullopt});
  batch.events.emplace_back(BlockRemoved{{}, "disk"});
  const Bytes want = concat({
      {0x92, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0, 0x92, 0x93},
      str("BlockRemoved"),
      {0x92, 0xcd, 0x01, 0x00, 0xce, 0x00, 0x01, 0x11, 0x70, 0xc0},
      {0x93},
      str("BlockRemoved"),
      {0x90},
      str("disk"),
  });
  EXPECT_EQ(encode_kv_event_batch(batch), want);
  Result<KvEventBatch> back = decode_kv_event_batch(want);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, batch);
}

TEST(KvEventCodecTest, AllBlocksClearedGoldenBytes) {
  KvEventBatch batch;
  batch.ts = 2.0;
  batch.events.emplace_back(AllBlocksCleared{});
  batch.data_parallel_rank = 3;
  const Bytes want = concat({
      {0x93, 0xcb, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x91, 0x91},
      str("AllBlocksCleared"),
      {0x03},
  });
  EXPECT_EQ(encode_kv_event_batch(batch), want);
  Result<KvEventBatch> back = decode_kv_event_batch(want);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, batch);
}

TEST(KvEventCodecTest, RoundTrips) {
  KvEventBatch batch;
  batch.ts = 1764625000.123456;
  batch.data_parallel_rank = -1;
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 64; ++i) tokens.push_back(i * 40000 - 1000000);
  batch.events.emplace_back(BlockStored{{1, 2, 3, 4}, 0, tokens, 16, int64_t{-5000000000}, "dram"});
  batch.events.emplace_back(BlockRemoved{{0x8000000000000000ull}, "pool"});
  batch.events.emplace_back(AllBlocksCleared{});
  batch.events.emplace_back(BlockStored{});
  const Bytes once = encode_kv_event_batch(batch);
  Result<KvEventBatch> back = decode_kv_event_batch(once);
  ASSERT_TRUE(back.ok()) << back.error().to_string();
  EXPECT_EQ(*back, batch);
  EXPECT_EQ(encode_kv_event_batch(*back), once);
  KvEventBatch empty;
  Result<KvEventBatch> empty_back = decode_kv_event_batch(encode_kv_event_batch(empty));
  ASSERT_TRUE(empty_back.ok());
  EXPECT_EQ(*empty_back, empty);
}

TEST(KvEventCodecTest, AcceptsWhatMsgspecAccepts) {
  // An integer ts; an older BlockStored without lora_id and medium; a negative (Python hash())
  // block hash; trailing fields of later vLLM versions on events and batch.
  const Bytes b = concat({
      {0x94, 0x07, 0x92, 0x95},
      str("BlockStored"),
      {0x91, 0xff, 0xc0, 0x91, 0x05, 0x01},
      {0x95},
      str("BlockRemoved"),
      {0x91, 0x09, 0xc0},
      str("extra"),
      {0x91, 0x02},
      {0x01, 0xc0},
  });
  Result<KvEventBatch> r = decode_kv_event_batch(b);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->ts, 7.0);
  ASSERT_EQ(r->events.size(), 2u);
  const auto& stored = std::get<BlockStored>(r->events[0]);
  EXPECT_EQ(stored.block_hashes, (std::vector<uint64_t>{0xFFFFFFFFFFFFFFFFull}));
  EXPECT_FALSE(stored.parent_block_hash.has_value());
  EXPECT_EQ(stored.token_ids, (std::vector<int32_t>{5}));
  EXPECT_EQ(stored.block_size, 1);
  EXPECT_FALSE(stored.lora_id.has_value());
  EXPECT_FALSE(stored.medium.has_value());
  EXPECT_EQ(std::get<BlockRemoved>(r->events[1]).block_hashes, (std::vector<uint64_t>{9}));
  EXPECT_EQ(r->data_parallel_rank, 1);
}

TEST(KvEventCodecTest, MalformedInputsNameTheProblem) {
  EXPECT_NE(decode_error({}).message().find("empty"), std::string::npos);
  KvEventBatch batch;
  batch.events.emplace_back(BlockStored{{1}, std::nullopt, {1, 2}, 2, std::nullopt, "pool"});
  Bytes good = encode_kv_event_batch(batch);
  for (size_t n = 1; n < good.size(); ++n) {
    const Bytes cut(good.begin(), good.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(decode_error(cut).code(), StatusCode::kInvalidArgument) << "cut at " << n;
  }
  Bytes trailing = good;
  trailing.push_back(0xc0);
  EXPECT_NE(decode_error(trailing).message().find("trailing"), std::string::npos);
  EXPECT_NE(decode_error({0x05}).message().find("not an array"), std::string::npos);
  EXPECT_NE(decode_error({0x91, 0x00}).message().find("fields"), std::string::npos);
  EXPECT_NE(decode_error(concat({{0x92, 0xa1, 'x', 0x90}})).message().find("ts"),
            std::string::npos);
  EXPECT_NE(decode_error(concat({{0x92, 0x00, 0x91, 0x91}, str("BlockMoved")}))
                .message()
                .find("BlockMoved"),
            std::string::npos);
  EXPECT_NE(decode_error(concat({{0x92, 0x00, 0x91, 0x92}, str("BlockStored"), {0x90}}))
                .message()
                .find("BlockStored"),
            std::string::npos);
  // A token beyond int32, a hash that is a string, a rank beyond int32.
  EXPECT_NE(decode_error(concat({{0x92, 0x00, 0x91, 0x95},
                                 str("BlockStored"),
                                 {0x90, 0xc0, 0x91, 0xce, 0x80, 0, 0, 0, 0x01}}))
                .message()
                .find("token_ids out of range"),
            std::string::npos);
  EXPECT_NE(decode_error(
                concat({{0x92, 0x00, 0x91, 0x93}, str("BlockRemoved"), {0x91}, str("h"), {0xc0}}))
                .message()
                .find("block_hashes"),
            std::string::npos);
  EXPECT_NE(decode_error({0x93, 0x00, 0x90, 0xcf, 0xff, 0, 0, 0, 0, 0, 0, 0})
                .message()
                .find("data_parallel_rank"),
            std::string::npos);
  // A forged element count far beyond the input, and nesting deeper than the limit.
  EXPECT_EQ(decode_error({0xdd, 0xff, 0xff, 0xff, 0xff, 0x00}).code(),
            StatusCode::kInvalidArgument);
  Bytes deep(200, 0x91);
  deep.push_back(0x00);
  EXPECT_EQ(decode_error(deep).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(decode_error({0xc1}).code(), StatusCode::kInvalidArgument);  // never-used byte
}

}  // namespace
}  // namespace keel::cluster
