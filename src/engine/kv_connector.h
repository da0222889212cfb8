// KvConnector: the one interface between an engine and the KV transfer services outside it
// (cluster/kv: a prefill TE's hand-off, a decode TE's receiver, the peer tier's fetcher and
// server). Those services see an engine only through it: the identity and size of its block
// payloads, reading a published block out, filing a peer's block in, and the measured prefill
// cost a fetcher weighs a transfer against. The push direction — each block the engine
// publishes, shown right after the step that computed it — is EngineDeps::published_blocks
// (published_block_tap.h).
//
// Thread safety: every method may be called from any thread but the engine's own (read_block
// waits for it).
#pragma once

#include <chrono>
#include <cstddef>
#include <span>

#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::engine {

class KvConnector {
 public:
  virtual ~KvConnector() = default;

  // The identity of this engine's block payloads (kv_tier_identity: model, KV dtype, block size):
  // two engines exchange blocks only when theirs are equal.
  [[nodiscard]] virtual kv::BlockHash kv_identity() const = 0;
  // Bytes of one block payload (the storage block: every layer's K and V rows).
  [[nodiscard]] virtual size_t block_bytes() const = 0;
  // Copies the payload of the published block `hash` into `out` (block_bytes() long): from the
  // pool — between steps, so the call may wait for one — else from a lower tier. NotFound when
  // the engine holds it nowhere; InvalidArgument for a wrong-size `out`; Unavailable when the
  // engine does not answer within `timeout` (stopping); Unsupported for an engine that holds only
  // some layers (pipeline parallelism).
  virtual Status read_block(const kv::BlockHash& hash, std::span<std::byte> out,
                            std::chrono::milliseconds timeout = std::chrono::seconds(5)) = 0;
  // Files a block received from a peer engine in the host tier T1 (written through to T2), where
  // admission's prefix lookup finds it and the tier cost model weighs fetching it against
  // recomputing. Unavailable without a host tier; InvalidArgument for a wrong-size payload.
  virtual Status accept_block(const kv::BlockHash& hash, std::span<const std::byte> payload) = 0;
  // The measured prefill seconds per token (0 until a prefill-sized step ran).
  [[nodiscard]] virtual double prefill_seconds_per_token() const = 0;
};

}  // namespace keel::engine
