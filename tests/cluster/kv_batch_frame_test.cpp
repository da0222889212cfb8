// KV batch frames (several blocks in one message): multi-block round trip, the golden layout, and
// a total decoder — every truncation, damaged header byte, count or limit out of range is
// InvalidArgument with a message naming it; a damaged block payload is Corrupt naming the block.
#include "cluster/transfer/kv_batch_frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace keel::cluster {
namespace kv_batch_frame_test {  // named: the unity build joins test files
namespace {

std::vector<std::byte> payload_of(size_t n, uint8_t seed) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return p;
}

struct Batch {
  KvBatchHeader header;
  std::vector<std::vector<std::byte>> payloads;
  [[nodiscard]] std::vector<std::byte> encode() const {
    std::vector<std::span<const std::byte>> spans(payloads.begin(), payloads.end());
    return encode_batch_frame(header, spans);
  }
};

// `n` blocks of `bytes` each (block i's payload seeded by i), chained by their hashes.
Batch batch_of(size_t n, size_t bytes) {
  Batch b;
  b.header.kv_identity = {1, 2};
  for (size_t i = 0; i < n; ++i) {
    b.payloads.push_back(payload_of(bytes, static_cast<uint8_t>(i)));
    b.header.blocks.push_back(make_frame_header(
        b.header.kv_identity, {10 + i, 20 + i},
        i == 0 ? kv::kRootHash : kv::BlockHash{9 + i, 19 + i}, 16, b.payloads.back()));
  }
  return b;
}

std::string message_of(const Status& s) { return std::string(s.message()); }

TEST(KvBatchFrameTest, MultiBlockRoundTrip) {
  const Batch b = batch_of(5, 1000);
  const auto bytes = b.encode();
  ASSERT_EQ(bytes.size(), kv_batch_header_bytes(5) + 5000);
  EXPECT_EQ(kv_header_magic(bytes), kKvBatchMagic);
  auto view = decode_batch_frame(bytes);
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  EXPECT_EQ(view->header, b.header);
  ASSERT_EQ(view->payloads.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    ASSERT_EQ(view->payloads[i].size(), 1000u);
    EXPECT_EQ(std::memcmp(view->payloads[i].data(), b.payloads[i].data(), 1000), 0) << i;
    const auto at =
        batch_block_payload(view->header, std::span(bytes).subspan(kv_batch_header_bytes(5)), i);
    EXPECT_EQ(at.data(), view->payloads[i].data()) << i;
    EXPECT_EQ(view->header.blocks[i].kv_identity, b.header.kv_identity);
  }
  // Blocks of different sizes, one of them empty, and the largest batch.
  Batch mixed = batch_of(3, 10);
  mixed.payloads[1].clear();
  mixed.header.blocks[1] = make_frame_header({1, 2}, {7, 7}, {8, 8}, 3, {});
  mixed.payloads[2] = payload_of(4097, 9);
  mixed.header.blocks[2] = make_frame_header({1, 2}, {5, 5}, {7, 7}, 16, mixed.payloads[2]);
  auto m = decode_batch_frame(mixed.encode());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->header, mixed.header);
  EXPECT_EQ(m->payloads[1].size(), 0u);
  auto full = decode_batch_frame(batch_of(kKvBatchMaxBlocks, 8).encode());
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  EXPECT_EQ(full->payloads.size(), kKvBatchMaxBlocks);
}

TEST(KvBatchFrameTest, GoldenLayout) {
  const auto h = encode_batch_header(batch_of(2, 4).header);
  ASSERT_EQ(h.size(), 40u + 2 * 56 + 8);
  const uint8_t magic[] = {'K', 'V', 'X', 'B', 1, 0, 0, 0};
  EXPECT_EQ(std::memcmp(h.data(), magic, sizeof(magic)), 0);
  EXPECT_EQ(static_cast<uint8_t>(h[8]), 1);         // identity.lo
  EXPECT_EQ(static_cast<uint8_t>(h[16]), 2);        // identity.hi
  EXPECT_EQ(static_cast<uint8_t>(h[24]), 2);        // block count
  EXPECT_EQ(static_cast<uint8_t>(h[32]), 8);        // total payload bytes
  EXPECT_EQ(static_cast<uint8_t>(h[40]), 10);       // block 0 hash.lo
  EXPECT_EQ(static_cast<uint8_t>(h[40 + 16]), 0);   // block 0 parent: the root (zero)
  EXPECT_EQ(static_cast<uint8_t>(h[40 + 32]), 16);  // block 0 token count
  EXPECT_EQ(static_cast<uint8_t>(h[40 + 40]), 4);   // block 0 payload bytes
  EXPECT_EQ(static_cast<uint8_t>(h[96]), 11);       // block 1 hash.lo
  EXPECT_EQ(static_cast<uint8_t>(h[96 + 16]), 10);  // block 1 parent.lo
}

TEST(KvBatchFrameTest, EveryTruncationIsInvalidArgument) {
  const auto bytes = batch_of(3, 64).encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_batch_frame(std::span(bytes).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << n;
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  auto r = decode_batch_frame(longer);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(message_of(r.error()), "kv batch frame: 193 payload bytes, header says 192");
  // A header cut short, or with a byte too many, names the sizes.
  const auto header = encode_batch_header(batch_of(3, 64).header);
  auto cut = decode_batch_header(std::span(header).first(header.size() - 1));
  EXPECT_EQ(message_of(cut.error()),
            "kv batch frame: header of 215 bytes, 216 expected for 3 blocks");
  auto tiny = decode_batch_header(std::span(header).first(20));
  EXPECT_EQ(message_of(tiny.error()), "kv batch frame: header of 20 bytes, at least 104 expected");
}

TEST(KvBatchFrameTest, EveryDamagedHeaderByteIsInvalidArgument) {
  const auto good = batch_of(2, 64).encode();
  for (size_t i = 0; i < kv_batch_header_bytes(2); ++i) {
    auto bad = good;
    bad[i] ^= std::byte{0x10};
    auto r = decode_batch_frame(bad);
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << i;
  }
  auto bad = good;
  bad[50] ^= std::byte{1};  // inside block 0's hash: only the header checksum can tell
  EXPECT_EQ(message_of(decode_batch_frame(bad).error()),
            "kv batch frame: header checksum mismatch");
}

TEST(KvBatchFrameTest, DamagedBlockIsCorruptAndNamed) {
  const Batch b = batch_of(4, 256);
  auto bytes = b.encode();
  bytes[kv_batch_header_bytes(4) + 2 * 256 + 17] ^= std::byte{1};  // block 2
  auto r = decode_batch_frame(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorrupt);
  EXPECT_EQ(message_of(r.error()), "kv batch frame: block 2 payload checksum mismatch");
  // The block's own check is the one frame_payload_checksum gives: the others still pass.
  auto header = decode_batch_header(std::span(bytes).first(kv_batch_header_bytes(4)));
  ASSERT_TRUE(header.ok());
  const auto payload = std::span<const std::byte>(bytes).subspan(kv_batch_header_bytes(4));
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(check_frame_payload(header->blocks[i], batch_block_payload(*header, payload, i)).ok(),
              i != 2)
        << i;
  }
}

TEST(KvBatchFrameTest, CountsAndLimitsAreEnforced) {
  // A re-encoded header with one field changed (so its checksum is right): the field's check.
  const auto with = [](const KvBatchHeader& h) {
    return decode_batch_header(encode_batch_header(h));
  };
  KvBatchHeader h = batch_of(2, 8).header;
  h.blocks[1].num_tokens = 0;
  EXPECT_EQ(message_of(with(h).error()), "kv batch frame: block 1: token count 0 out of range");
  h.blocks[1].num_tokens = kKvFrameMaxTokens + 1;
  EXPECT_EQ(with(h).error().code(), StatusCode::kInvalidArgument);
  h.blocks[1].num_tokens = 16;
  h.blocks[0].payload_bytes = kKvFrameMaxPayloadBytes + 1;
  EXPECT_EQ(message_of(with(h).error()),
            "kv batch frame: block 0: payload of 268435457 bytes exceeds the limit");
  h.blocks[0].payload_bytes = kKvFrameMaxPayloadBytes;
  h.blocks[1].payload_bytes = 1;
  EXPECT_EQ(message_of(with(h).error()),
            "kv batch frame: payload of 268435457 bytes exceeds the limit");
  // Counts: 0 and past the maximum are refused before any entry is read.
  auto bytes = encode_batch_header(batch_of(1, 8).header);
  bytes[24] = std::byte{0};
  EXPECT_EQ(message_of(decode_batch_header(bytes).error()),
            "kv batch frame: block count 0 out of range [1, 64]");
  bytes[24] = std::byte{65};
  EXPECT_EQ(decode_batch_header(bytes).error().code(), StatusCode::kInvalidArgument);
  // Flags, reserved fields and the version.
  for (const size_t at : {size_t{4}, size_t{6}, size_t{28}, size_t{40 + 36}}) {
    auto b = encode_batch_header(batch_of(1, 8).header);
    b[at] ^= std::byte{2};
    EXPECT_EQ(decode_batch_header(b).error().code(), StatusCode::kInvalidArgument) << at;
  }
  // A one-block frame's header is not a batch header, and the other way round.
  const KvFrameHeaderBytes single = encode_frame_header(batch_of(1, 8).header.blocks[0]);
  EXPECT_EQ(kv_header_magic(single), kKvFrameMagic);
  EXPECT_EQ(message_of(decode_batch_header(single).error()),
            "kv batch frame: header of 88 bytes, at least 104 expected");
  const auto batch_header = encode_batch_header(batch_of(1, 8).header);
  EXPECT_FALSE(decode_frame_header(std::span(batch_header).first(kKvFrameHeaderBytes)).ok());
  EXPECT_EQ(kv_header_magic(std::span(single).first(3)), 0u);
}

}  // namespace
}  // namespace kv_batch_frame_test
}  // namespace keel::cluster
