// WeightsFrame: one chunk of a weights stream on the wire (a model store entry forked from a peer
// TE, cluster/weights/weights_stream.h) — the transfer service's weights channel
// (transfer_channel.h), beside and never mixed with its KV frames (kv_transfer_frame.h). A frame is
// a fixed 80-byte header followed by the chunk's bytes. All integers little-endian:
//   magic u32 "WTXF" | version u16 | reserved u16 (0) | stream identity lo,hi u64 |
//   offset u64 | entry bytes u64 | entry hash u64 | stream id u64 | payload_bytes u64 |
//   payload_checksum u64 (XXH3-64 of the payload) | header_checksum u64 (XXH3-64 of bytes [0, 72))
// stream identity: weights_stream_identity of the entry's name (a receiver for another entry drops
// the chunk); offset: where the chunk's bytes go in the entry, of entry bytes in all; entry hash:
// the whole entry's XXH3-64 (checked by the receiver once every byte arrived); stream id: the
// fetch this chunk answers.
//
// Decoding is total: any bytes give a header or InvalidArgument (size, magic, version, reserved,
// header checksum, a chunk that does not fit in its entry or exceeds the chunk limit); a payload
// is checked against the header with check_weights_payload (Corrupt).
// Thread safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/result.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::cluster {

inline constexpr uint32_t kWeightsFrameMagic = 0x46585457;  // "WTXF" little-endian
inline constexpr uint16_t kWeightsFrameVersion = 1;
inline constexpr size_t kWeightsFrameHeaderBytes = 80;
// The largest chunk a decoder accepts (a sender's chunk size is at most kMaxWeightsChunkBytes).
inline constexpr uint64_t kWeightsFrameMaxPayloadBytes = uint64_t{64} << 20;

struct WeightsFrameHeader {
  kv::BlockHash stream_identity;
  uint64_t offset = 0;
  uint64_t entry_bytes = 0;
  uint64_t entry_hash = 0;
  uint64_t stream_id = 0;
  uint64_t payload_bytes = 0;  // ≤ kWeightsFrameMaxPayloadBytes; offset + payload ≤ entry bytes
  uint64_t payload_checksum = 0;
  friend bool operator==(const WeightsFrameHeader&, const WeightsFrameHeader&) = default;
};

using WeightsFrameHeaderBytes = std::array<std::byte, kWeightsFrameHeaderBytes>;

[[nodiscard]] WeightsFrameHeaderBytes encode_weights_header(const WeightsFrameHeader& header);
// Exactly kWeightsFrameHeaderBytes bytes → header, or InvalidArgument.
[[nodiscard]] Result<WeightsFrameHeader> decode_weights_header(std::span<const std::byte> bytes);
// OK when `payload` has the header's length and checksum; Corrupt otherwise.
[[nodiscard]] Status check_weights_payload(const WeightsFrameHeader& header,
                                           std::span<const std::byte> payload);

}  // namespace keel::cluster
