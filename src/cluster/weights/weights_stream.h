// Weights stream: the wire side of forking a model store entry from a peer TE (the NPU-fork
// analogue). A target TE asks a source TE's WeightsServer, over a link call `weights_fetch`, to
// push the entry named `entry` (store_key.h's entry name) to `reply_to` — the target's
// WeightsReceiver, a transfer server on the weights channel (transfer/transfer_channel.h). The
// source pushes the entry's bytes (the store's run-time layout, straight from its mapping) as
// chunks of `chunk_bytes`, each a weights frame (transfer/weights_frame.h) whose stream identity is
// weights_stream_identity(entry) (a receiver for another entry drops it), with its offset, the
// entry's size and XXH3-64, the stream id and the chunk's own payload checksum. It then flushes and
// replies {status, bytes, entry_hash}. The receiver checks, at the end, that every byte arrived and
// that the whole file hashes to entry_hash, before the entry gets its final name.
//
// probe_bytes > 0: a bandwidth probe under kWeightsProbeEntry's identity; the receiver drops its
// chunks (bench-scale times it). With entry "" the source pushes one chunk of zeros again and
// again (the transport alone: that chunk stays in cache at both ends); with an entry named, it
// pushes the entry's first probe_bytes bytes from its mapping — the bytes a fork moves, without
// the target's writes into fresh pages or its checks.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cluster/protocol/messages.h"
#include "cluster/transfer/kv_transfer_frame.h"
#include "cluster/transfer/weights_frame.h"
#include "core/result.h"
#include "kv/block_hash.h"

namespace keel::cluster {

inline constexpr std::string_view kWeightsFetch = "weights_fetch";
// The identity name of probe streams (no entry name takes it: entry names start "keel-store-").
inline constexpr std::string_view kWeightsProbeEntry = "probe";
inline constexpr uint64_t kDefaultWeightsChunkBytes = uint64_t{4} << 20;
inline constexpr uint64_t kMaxWeightsChunkBytes = kWeightsFrameMaxPayloadBytes;

struct WeightsFetchRequest {
  std::string entry;     // the store entry's name; "" for a zero probe
  std::string reply_to;  // the receiver's transfer address "host:port" (weights channel)
  uint64_t stream_id = 0;
  uint64_t chunk_bytes = kDefaultWeightsChunkBytes;
  uint64_t probe_bytes = 0;
  friend bool operator==(const WeightsFetchRequest&, const WeightsFetchRequest&) = default;
};

struct WeightsFetchReply {
  Status status;
  uint64_t bytes = 0;       // bytes pushed and flushed
  uint64_t entry_hash = 0;  // XXH3-64 of the whole entry (0 for a probe)
};

// One chunk's place in its stream (its frame's fields).
struct WeightsChunk {
  uint64_t offset = 0;
  uint64_t total_bytes = 0;
  uint64_t entry_hash = 0;
  uint64_t stream_id = 0;
  friend bool operator==(const WeightsChunk&, const WeightsChunk&) = default;
};

// The identity a stream of `entry`'s bytes carries (two XXH3-64 of prefixed names, 128 bits).
[[nodiscard]] kv::BlockHash weights_stream_identity(std::string_view entry);
// A chunk's place, from its frame.
[[nodiscard]] WeightsChunk weights_chunk_of(const WeightsFrameHeader& header);
// InvalidArgument unless the chunk lies inside its stream: offset + payload ≤ total_bytes.
[[nodiscard]] Status check_weights_chunk(const WeightsChunk& c, uint64_t payload_bytes);

[[nodiscard]] net::Message encode(const WeightsFetchRequest& m);
[[nodiscard]] Result<WeightsFetchRequest> decode_weights_fetch(const Json& body);
[[nodiscard]] Json encode_weights_reply(const WeightsFetchReply& r);
[[nodiscard]] Result<WeightsFetchReply> decode_weights_reply(const Json& body);

}  // namespace keel::cluster
