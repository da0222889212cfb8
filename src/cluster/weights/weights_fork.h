// fork_entry: the fetching side of a fork — a TE on a host without a model store entry pulls it
// from a named peer's WeightsServer (weights_stream.h) into its own store directory through its
// WeightsReceiver, which checks the stream and renames the entry into place. A chain relay needs
// nothing more: the peer named may be a TE still receiving the entry (its server relays).
//
// Thread safety: one call at a time per receiver.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "cluster/weights/weights_receiver.h"
#include "core/result.h"

namespace keel::cluster {

struct ForkResult {
  std::string path;  // the entry, in the receiver's store directory
  uint64_t bytes = 0;
  double seconds = 0;  // the call: request → every byte checked and the entry renamed
};

// Pulls `entry` from the WeightsServer at `peer` ("host:port") into `receiver`'s store. On any
// failure (peer unreachable or failing, truncated stream, hash mismatch, timeout) no partial file
// is left and the error says which.
[[nodiscard]] Result<ForkResult> fork_entry(const std::string& peer, const std::string& entry,
                                            WeightsReceiver* receiver,
                                            std::chrono::milliseconds timeout,
                                            uint64_t chunk_bytes = kDefaultWeightsChunkBytes);

// A probe of the link to `peer`: it pushes `bytes` bytes to `receiver`, which drops them — one
// chunk of zeros again and again, or, with `entry` named, that entry's first `bytes` bytes from
// the peer's mapping (weights_stream.h). The seconds from the request to the peer's flushed reply.
[[nodiscard]] Result<double> probe_weights_link(const std::string& peer, WeightsReceiver* receiver,
                                                uint64_t bytes, std::chrono::milliseconds timeout,
                                                uint64_t chunk_bytes = kDefaultWeightsChunkBytes,
                                                const std::string& entry = "");

}  // namespace keel::cluster
