// Weights frames (the transfer service's weights channel): round trip, the header's layout, and a
// total decoder — malformed headers (size, magic, version, reserved, header checksum, a chunk
// outside its entry or past the limit) are InvalidArgument, a damaged payload is Corrupt.
#include "cluster/transfer/weights_frame.h"

#include <gtest/gtest.h>

#include <vector>

#include "cluster/transfer/kv_transfer_frame.h"

namespace keel::cluster {
namespace {

std::vector<std::byte> payload_of(size_t n) {
  std::vector<std::byte> p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>((i * 17 + 3) & 0xff);
  return p;
}

WeightsFrameHeader header_for(const std::vector<std::byte>& payload) {
  WeightsFrameHeader h;
  h.stream_identity = {0x1234, 0x5678};
  h.offset = 4096;
  h.entry_bytes = 4096 + payload.size() + 10;
  h.entry_hash = 0xfeed;
  h.stream_id = 9;
  h.payload_bytes = payload.size();
  h.payload_checksum = frame_payload_checksum(payload);
  return h;
}

TEST(WeightsFrameTest, RoundTripsWithItsOwnMagicAndChecksums) {
  const auto payload = payload_of(1000);
  const WeightsFrameHeader h = header_for(payload);
  const WeightsFrameHeaderBytes bytes = encode_weights_header(h);
  EXPECT_EQ(std::to_integer<char>(bytes[0]), 'W');  // "WTXF": never read as a KV frame
  EXPECT_EQ(std::to_integer<char>(bytes[3]), 'F');
  auto back = decode_weights_header(bytes);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, h);
  EXPECT_TRUE(check_weights_payload(h, payload).ok());
  auto damaged = payload;
  damaged[500] ^= std::byte{0x40};
  EXPECT_EQ(check_weights_payload(h, damaged).code(), StatusCode::kCorrupt);
  EXPECT_EQ(check_weights_payload(h, std::span(payload).first(999)).code(), StatusCode::kCorrupt);
  // The KV codec never takes a weights header, even padded to its size (the magic differs).
  std::vector<std::byte> padded(bytes.begin(), bytes.end());
  padded.resize(kKvFrameHeaderBytes);
  EXPECT_EQ(decode_frame_header(padded).error().code(), StatusCode::kInvalidArgument);
}

TEST(WeightsFrameTest, EveryDamagedHeaderByteIsRefused) {
  const WeightsFrameHeaderBytes good = encode_weights_header(header_for(payload_of(64)));
  for (size_t i = 0; i < good.size(); ++i) {
    WeightsFrameHeaderBytes bad = good;
    bad[i] ^= std::byte{0x01};
    EXPECT_EQ(decode_weights_header(bad).error().code(), StatusCode::kInvalidArgument) << i;
  }
  EXPECT_FALSE(decode_weights_header(std::span(good).first(79)).ok());
}

TEST(WeightsFrameTest, AChunkMustLieInsideItsEntryAndUnderTheLimit) {
  WeightsFrameHeader h = header_for(payload_of(100));
  h.entry_bytes = h.offset + 99;  // one byte short
  EXPECT_EQ(decode_weights_header(encode_weights_header(h)).error().code(),
            StatusCode::kInvalidArgument);
  h.entry_bytes = h.offset + 100;  // exactly fits
  EXPECT_TRUE(decode_weights_header(encode_weights_header(h)).ok());
  h.offset = ~uint64_t{0};  // no wrap-around
  EXPECT_FALSE(decode_weights_header(encode_weights_header(h)).ok());
  h.offset = 0;
  h.payload_bytes = kWeightsFrameMaxPayloadBytes + 1;
  h.entry_bytes = h.payload_bytes;
  EXPECT_FALSE(decode_weights_header(encode_weights_header(h)).ok());
}

}  // namespace
}  // namespace keel::cluster
