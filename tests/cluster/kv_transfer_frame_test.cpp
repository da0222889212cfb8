// KV transfer frames: round trip, the golden header layout, and a total decoder — every malformed
// input is InvalidArgument (truncation, bad magic/version/flags, a damaged header byte, lengths
// past the limits), a damaged payload is Corrupt.
#include "cluster/transfer/kv_transfer_frame.h"

#include <gtest/gtest.h>

#include <cstring>

namespace keel::cluster {
namespace {

std::vector<std::byte> payload_of(size_t n, uint8_t seed) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return p;
}

KvFrameHeader header_for(std::span<const std::byte> payload) {
  return make_frame_header({1, 2}, {3, 4}, {5, 6}, 16, payload);
}

TEST(KvTransferFrameTest, RoundTrip) {
  const auto payload = payload_of(1000, 7);
  const KvFrameHeader h = header_for(payload);
  EXPECT_EQ(h.payload_bytes, 1000u);
  EXPECT_EQ(h.payload_checksum, frame_payload_checksum(payload));
  const auto bytes = encode_frame(h, payload);
  ASSERT_EQ(bytes.size(), kKvFrameHeaderBytes + 1000);
  auto view = decode_frame(bytes);
  ASSERT_TRUE(view.ok()) << view.status().to_string();
  EXPECT_EQ(view->header, h);
  ASSERT_EQ(view->payload.size(), payload.size());
  EXPECT_EQ(std::memcmp(view->payload.data(), payload.data(), payload.size()), 0);
  auto header = decode_frame_header(std::span(bytes).first(kKvFrameHeaderBytes));
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(*header, h);
}

TEST(KvTransferFrameTest, GoldenLayout) {
  const KvFrameHeaderBytes b = encode_frame_header(header_for({}));
  const uint8_t magic[] = {'K', 'V', 'X', 'F', 1, 0, 0, 0};
  EXPECT_EQ(std::memcmp(b.data(), magic, sizeof(magic)), 0);
  EXPECT_EQ(static_cast<uint8_t>(b[8]), 1);    // identity.lo
  EXPECT_EQ(static_cast<uint8_t>(b[16]), 2);   // identity.hi
  EXPECT_EQ(static_cast<uint8_t>(b[24]), 3);   // block hash.lo
  EXPECT_EQ(static_cast<uint8_t>(b[40]), 5);   // parent.lo
  EXPECT_EQ(static_cast<uint8_t>(b[56]), 16);  // token count
}

TEST(KvTransferFrameTest, EveryTruncationIsInvalidArgument) {
  const auto payload = payload_of(64, 1);
  const auto bytes = encode_frame(header_for(payload), payload);
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = decode_frame(std::span(bytes).first(n));
    ASSERT_FALSE(r.ok()) << n;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << n;
  }
  auto longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_EQ(decode_frame(longer).error().code(), StatusCode::kInvalidArgument);
}

TEST(KvTransferFrameTest, EveryDamagedHeaderByteIsInvalidArgument) {
  const auto payload = payload_of(64, 2);
  const auto good = encode_frame(header_for(payload), payload);
  for (size_t i = 0; i < kKvFrameHeaderBytes; ++i) {
    auto bad = good;
    bad[i] ^= std::byte{0x10};
    auto r = decode_frame(bad);
    ASSERT_FALSE(r.ok()) << i;
    EXPECT_EQ(r.error().code(), StatusCode::kInvalidArgument) << i;
  }
}

TEST(KvTransferFrameTest, DamagedPayloadIsCorrupt) {
  const auto payload = payload_of(4096, 3);
  auto bytes = encode_frame(header_for(payload), payload);
  bytes[kKvFrameHeaderBytes + 4000] ^= std::byte{1};
  auto r = decode_frame(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), StatusCode::kCorrupt);
  EXPECT_EQ(check_frame_payload(header_for(payload), std::span(payload).first(10)).code(),
            StatusCode::kCorrupt);
}

TEST(KvTransferFrameTest, LimitsAreEnforced) {
  KvFrameHeader h = header_for({});
  h.num_tokens = 0;
  EXPECT_EQ(decode_frame_header(encode_frame_header(h)).error().code(),
            StatusCode::kInvalidArgument);
  h.num_tokens = kKvFrameMaxTokens + 1;
  EXPECT_FALSE(decode_frame_header(encode_frame_header(h)).ok());
  h.num_tokens = 16;
  h.payload_bytes = kKvFrameMaxPayloadBytes + 1;
  EXPECT_FALSE(decode_frame_header(encode_frame_header(h)).ok());
  h.payload_bytes = kKvFrameMaxPayloadBytes;
  EXPECT_TRUE(decode_frame_header(encode_frame_header(h)).ok());
}

// A KV frame is a KV block only: nonzero flags (version 1 once flagged weights chunks there) and a
// block without tokens are refused.
TEST(KvTransferFrameTest, FlagsMustBeZeroAndABlockHoldsTokens) {
  const KvFrameHeader h = header_for({});
  KvFrameHeaderBytes bytes = encode_frame_header(h);
  ASSERT_TRUE(decode_frame_header(bytes).ok());
  bytes[6] = std::byte{1};  // flags
  EXPECT_EQ(decode_frame_header(bytes).error().code(), StatusCode::kInvalidArgument);
  KvFrameHeader empty = h;
  empty.num_tokens = 0;
  EXPECT_EQ(decode_frame_header(encode_frame_header(empty)).error().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::cluster
