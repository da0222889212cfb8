// KvBatchFrame: several KV blocks in one message of the KV transfer service — the frame kind
// "KVXB" beside the one-block frame "KVXF" (kv_transfer_frame.h), on the same KV channel. A
// sender coalesces the blocks that are ready at the same moment into one message, so a stream of
// blocks pays one transport round trip (a UCX rendezvous) per batch, not per block. The header is
// the message's header; the payload is the blocks' payloads back to back, in header order. All
// integers little-endian:
//   fixed (40 bytes): magic u32 "KVXB" | version u16 | flags u16 (0) | kv identity lo,hi u64 |
//     num_blocks u32 | reserved u32 (0) | payload_bytes u64 (the sum of the blocks')
//   num_blocks entries of 56 bytes: block hash lo,hi u64 | parent hash lo,hi u64 |
//     num_tokens u32 | reserved u32 (0) | payload_bytes u64 | payload_checksum u64 (XXH3-64)
//   header_checksum u64: XXH3-64 of every header byte before it
// Each block keeps its own checksum, so a damaged block is dropped alone; the header checksum
// keeps a damaged key from filing good bytes under the wrong block.
//
// Decoding is total: any bytes give a header/frame or an error — InvalidArgument for malformed
// bytes (size, magic, version, flags, counts, limits, header checksum), Corrupt for a block whose
// payload fails its checksum (check_frame_payload on the block's span).
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "cluster/transfer/kv_transfer_frame.h"
#include "core/result.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::cluster {

inline constexpr uint32_t kKvBatchMagic = 0x4258564B;  // "KVXB" little-endian
inline constexpr uint16_t kKvBatchVersion = 1;
inline constexpr size_t kKvBatchFixedBytes = 40;  // before the entries
inline constexpr size_t kKvBatchEntryBytes = 56;
// Blocks in one frame (the header, 3.6 KB at most, travels in the transport's first fragment).
inline constexpr uint32_t kKvBatchMaxBlocks = 64;
// A batch's payload: each block within kKvFrameMaxPayloadBytes, all together within this.
inline constexpr uint64_t kKvBatchMaxPayloadBytes = uint64_t{256} << 20;

// Header bytes of a batch of `num_blocks` blocks.
[[nodiscard]] constexpr size_t kv_batch_header_bytes(size_t num_blocks) {
  return kKvBatchFixedBytes + num_blocks * kKvBatchEntryBytes + 8;
}

struct KvBatchHeader {
  kv::BlockHash kv_identity;
  // The blocks in payload order; each one's kv_identity is the batch's.
  std::vector<KvFrameHeader> blocks;
  [[nodiscard]] uint64_t payload_bytes() const;
  friend bool operator==(const KvBatchHeader&, const KvBatchHeader&) = default;
};

// The header bytes. Requires 1..kKvBatchMaxBlocks blocks.
[[nodiscard]] std::vector<std::byte> encode_batch_header(const KvBatchHeader& header);
// Exactly one batch header → its fields, or InvalidArgument naming what is wrong.
[[nodiscard]] Result<KvBatchHeader> decode_batch_header(std::span<const std::byte> bytes);
// The magic of a KV-channel header (0 when shorter than 4 bytes): which decoder applies.
[[nodiscard]] uint32_t kv_header_magic(std::span<const std::byte> bytes);

// Block `i`'s bytes within a batch payload of the header's total length.
[[nodiscard]] std::span<const std::byte> batch_block_payload(const KvBatchHeader& header,
                                                             std::span<const std::byte> payload,
                                                             size_t i);

// A whole batch frame (tests, fuzzing): the header then the payloads back to back (each block's
// payload_bytes must be its payload's size).
[[nodiscard]] std::vector<std::byte> encode_batch_frame(
    const KvBatchHeader& header, std::span<const std::span<const std::byte>> payloads);

struct KvBatchView {
  KvBatchHeader header;
  std::vector<std::span<const std::byte>> payloads;  // into the decoded bytes, one per block
};
// Exactly one batch frame → its header and block payloads (every checksum verified):
// InvalidArgument when malformed or of the wrong length, Corrupt naming the first block whose
// payload fails its checksum.
[[nodiscard]] Result<KvBatchView> decode_batch_frame(std::span<const std::byte> bytes);

}  // namespace keel::cluster
