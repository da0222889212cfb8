// KvTransferFrame: one KV block on the wire between two engines (the KV transfer service). A frame
// is a fixed 88-byte header followed by the block's payload (the engine's tier payload layout, the
// bytes a TierStore holds). All integers little-endian:
//   magic u32 "KVXF" | version u16 | flags u16 | kv identity lo,hi u64 | block hash lo,hi u64 |
//   parent hash lo,hi u64 | num_tokens u32 | reserved u32 (0) | payload_bytes u64 |
//   payload_checksum u64 (XXH3-64 of the payload) | header_checksum u64 (XXH3-64 of bytes [0, 80))
// flags and reserved are 0 (a decoder refuses anything else). A KV frame carries a KV block only:
// weights travel on their own channel, with their own frame (weights_frame.h, transfer_channel.h).
// The header has its own checksum because a damaged block hash with an intact payload would
// otherwise file good bytes under a wrong key — wrong output, not a recompute.
//
// Decoding is total: any bytes give a header/frame or an error — InvalidArgument for malformed
// bytes (size, magic, version, limits, header checksum), Corrupt for a payload whose checksum
// does not match. Whether the identity is the receiver's is the receiver's check.
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/result.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::cluster {

inline constexpr uint32_t kKvFrameMagic = 0x4658564B;  // "KVXF" little-endian
inline constexpr uint16_t kKvFrameVersion = 1;
inline constexpr size_t kKvFrameHeaderBytes = 88;
// Limits a decoder enforces (a block of a 128-layer, 64-head model in f32 stays far below).
inline constexpr uint64_t kKvFrameMaxPayloadBytes = uint64_t{256} << 20;
inline constexpr uint32_t kKvFrameMaxTokens = 1u << 16;

struct KvFrameHeader {
  kv::BlockHash kv_identity;      // engine::kv_tier_identity(model, KV dtype, block size)
  kv::BlockHash block_hash;       // the block's prefix key (kv/block_hash.h)
  kv::BlockHash parent_hash;      // the key of the block before it (kv::kRootHash for the first)
  uint32_t num_tokens = 0;        // tokens the block holds, in [1, kKvFrameMaxTokens]
  uint64_t payload_bytes = 0;     // length of the payload that follows, ≤ kKvFrameMaxPayloadBytes
  uint64_t payload_checksum = 0;  // XXH3-64 (seed 0) of the payload
  friend bool operator==(const KvFrameHeader&, const KvFrameHeader&) = default;
};

using KvFrameHeaderBytes = std::array<std::byte, kKvFrameHeaderBytes>;

// A header for `payload` (its length and checksum filled in).
[[nodiscard]] KvFrameHeader make_frame_header(const kv::BlockHash& kv_identity,
                                              const kv::BlockHash& block_hash,
                                              const kv::BlockHash& parent_hash, uint32_t num_tokens,
                                              std::span<const std::byte> payload);

// XXH3-64 (seed 0) of a payload.
[[nodiscard]] uint64_t frame_payload_checksum(std::span<const std::byte> payload);

[[nodiscard]] KvFrameHeaderBytes encode_frame_header(const KvFrameHeader& header);
// Exactly kKvFrameHeaderBytes bytes → header, or InvalidArgument.
[[nodiscard]] Result<KvFrameHeader> decode_frame_header(std::span<const std::byte> bytes);
// OK when `payload` has the header's length and checksum; Corrupt otherwise.
[[nodiscard]] Status check_frame_payload(const KvFrameHeader& header,
                                         std::span<const std::byte> payload);

// A whole frame: header bytes then payload (the header's payload_bytes must be payload.size()).
[[nodiscard]] std::vector<std::byte> encode_frame(const KvFrameHeader& header,
                                                  std::span<const std::byte> payload);

struct KvFrameView {
  KvFrameHeader header;
  std::span<const std::byte> payload;  // into the decoded bytes
};
// Exactly one frame → its header and payload (checksum verified): InvalidArgument when malformed
// or of the wrong length, Corrupt when the payload fails its checksum.
[[nodiscard]] Result<KvFrameView> decode_frame(std::span<const std::byte> bytes);

}  // namespace keel::cluster
