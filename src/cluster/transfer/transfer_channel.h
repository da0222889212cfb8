// The transfer service's channels: what one UCX connection between two TEs may carry, each kind
// with its own active-message id and its own frame (never a flag that changes what another
// frame's fields mean). kKvBlocks: KV blocks between engines (kv_transfer_frame.h — prefill →
// decode hand-off, the peer tier); kWeights: chunks of a model store entry forked from a peer
// (weights_frame.h). A server listens on one channel and drops, as malformed, a frame of the
// other.
//
// Thread safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace keel::cluster {

enum class TransferChannel : uint8_t { kKvBlocks, kWeights };

// The UCX active-message ids of the channels' frames.
inline constexpr unsigned kKvFrameAmId = 0x4B56;       // "KV"
inline constexpr unsigned kWeightsFrameAmId = 0x5754;  // "WT"

[[nodiscard]] constexpr unsigned transfer_am_id(TransferChannel c) {
  return c == TransferChannel::kWeights ? kWeightsFrameAmId : kKvFrameAmId;
}

[[nodiscard]] constexpr std::string_view transfer_channel_name(TransferChannel c) {
  return c == TransferChannel::kWeights ? "weights" : "kv";
}

}  // namespace keel::cluster
