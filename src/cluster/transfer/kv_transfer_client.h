// KvTransferClient: the sending end of the KV transfer service — a prefill TE streaming KV blocks
// to one decode TE's KvTransferServer as they fill, so the transfer overlaps the rest of the
// prefill. send() never waits on the network: it checksums the block into its frame header (on
// the caller's thread) and queues it; the client's UCX thread sends queued blocks in order (a
// bounded number of messages in flight). When a message may leave, the KV blocks queued at that
// moment may go together, up to max_blocks_per_frame and max_frame_bytes (one block: a frame of
// kv_transfer_frame.h; several: kv_batch_frame.h, sent from the blocks' own memory) — no block
// ever waits for others to fill a batch, so streaming keeps its latency, and a backed-up queue
// pays one transport round trip per batch instead of per block. flush()
// waits, up to a deadline, until every block queued so far has reached the peer. The client
// learns of a lost peer through UCX when the transport reports it, and otherwise through its
// deadlines (see kKvTransferErrMode); a failed connection fails every later call. The caller's
// answer to any failure is the same: the decode side recomputes what it lacks.
//
// Fault hooks (tests, benchmarks): a throttled link, a dropped or corrupted frame, a stall.
// Thread safety: every public method from any thread; the destructor must not race them.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/transfer/kv_transfer_frame.h"
#include "cluster/transfer/weights_frame.h"
#include "core/result.h"
#include "core/status.h"

namespace keel::cluster {

// flush()'s message when its deadline passed with the connection still up (callers that wait in
// slices tell a timeout from a failure by it).
inline constexpr std::string_view kKvFlushTimedOut = "kv transfer: flush timed out";

// Faults the client injects into its own stream. Frame indices count sent blocks from 0.
struct KvTransferFaults {
  double throttle_bytes_per_s = 0;  // > 0: payload bytes leave no faster than this
  int64_t drop_frame = -1;          // this frame is not sent (the receiver never sees it)
  int64_t corrupt_frame = -1;       // this frame's payload has one byte flipped after checksumming
  int64_t stall_after_frames = -1;  // after this many frames nothing more is sent
};

struct KvTransferClientOptions {
  std::string host = "127.0.0.1";  // the server's address
  uint16_t port = 0;               // the server's port
  kv::BlockHash kv_identity;       // the sending engine's engine::kv_tier_identity
  // Bytes of queued (not yet sent) payloads beyond which send() refuses blocks.
  size_t max_queued_bytes = size_t{512} << 20;
  int max_in_flight = 8;  // messages handed to UCX and not yet complete
  // KV blocks one message may carry (1: one block per message, the one-block frame, which a
  // server of before the batch frame also reads) and their payload bytes together (a block
  // larger than this still goes, alone). Weights chunks, and every block while the throttle
  // fault is on, go one per message. Default 1: batches measured slower on UCX 1.13, which sends
  // a message gathered from several buffers by copying it through its active-message lanes
  // instead of its zero-copy rendezvous (docs/benchmarks.md, "KV transfer service").
  int max_blocks_per_frame = 1;
  size_t max_frame_bytes = size_t{8} << 20;
  // How long the client's UCX thread polls after progress before it sleeps (until a send() or
  // flush() wakes it, or at most 1 ms while messages are in flight). Short: with one block a
  // message the receiver pulls the payload (rendezvous get), so the sender only waits for
  // completions, and on a host short of cores its spin took the CPU the receiver's copy needed
  // (0.51-0.55 against 0.73-0.77 CPU s/GB at 100 us against 2 ms: docs/benchmarks.md). Batched
  // messages go through UCX's sender-driven lanes and want the sender polling.
  std::chrono::microseconds spin_window{100};
  // connect() waits this long for the connection to be up.
  std::chrono::milliseconds connect_timeout{5000};
  KvTransferFaults faults;
  [[nodiscard]] Status validate() const;
};

// One block to send; the client owns the payload from send() on. A borrowed payload (`borrowed`
// non-empty; `payload` then unused) is sent straight from the caller's memory — a mapped store
// entry, a shared zero buffer — which `owner` keeps valid until the send completed or was dropped.
struct KvBlockToSend {
  kv::BlockHash block_hash;
  kv::BlockHash parent_hash;
  uint32_t num_tokens = 0;
  std::vector<std::byte> payload;
  std::span<const std::byte> borrowed;
  std::shared_ptr<const void> owner;
  // The payload's XXH3-64 when the caller already has it (a relay forwarding a chunk whose frame
  // checksum it just verified); send() computes it otherwise.
  std::optional<uint64_t> payload_checksum;
  [[nodiscard]] std::span<const std::byte> bytes() const {
    return borrowed.empty() ? std::span<const std::byte>(payload) : borrowed;
  }
};

// One chunk of a weights stream to send on the weights channel (weights_frame.h: the fields of
// its header but the payload's length and checksum); payload ownership as KvBlockToSend's.
struct WeightsChunkToSend {
  kv::BlockHash stream_identity;
  uint64_t offset = 0;
  uint64_t entry_bytes = 0;
  uint64_t entry_hash = 0;
  uint64_t stream_id = 0;
  std::vector<std::byte> payload;
  std::span<const std::byte> borrowed;
  std::shared_ptr<const void> owner;
  std::optional<uint64_t> payload_checksum;
  [[nodiscard]] std::span<const std::byte> bytes() const {
    return borrowed.empty() ? std::span<const std::byte>(payload) : borrowed;
  }
};

struct KvTransferClientStats {
  int64_t blocks_queued = 0;   // accepted by send()
  int64_t blocks_sent = 0;     // blocks whose message's send completed
  int64_t messages_sent = 0;   // those messages (a batch is one)
  int64_t bytes_sent = 0;      // their payload bytes
  int64_t blocks_dropped = 0;  // not sent: the drop fault, or abandoned after a failure
};

class KvTransferClient {
 public:
  // Connects (waits up to connect_timeout for the connection to be up). Unavailable when the peer
  // cannot be reached.
  static Result<std::unique_ptr<KvTransferClient>> connect(KvTransferClientOptions options);
  KvTransferClient(const KvTransferClient&) = delete;
  KvTransferClient& operator=(const KvTransferClient&) = delete;
  // Abandons queued blocks, closes the connection, stops.
  ~KvTransferClient();

  // Queues one block. Unavailable after the connection failed; ResourceExhausted when the queue
  // holds max_queued_bytes; InvalidArgument for a payload over the frame limit or no tokens.
  Status send(KvBlockToSend block);
  // Queues one weights chunk, on the weights channel, behind the blocks queued before it; errors
  // as send()'s (InvalidArgument for a chunk outside its entry or over the chunk limit).
  Status send_weights(WeightsChunkToSend chunk);
  // Waits until every block queued before the call has been delivered to the peer (UCX endpoint
  // flush: the receiver's transport holds it), or the deadline passes (Unavailable "timed out"),
  // or the connection fails (Unavailable with the reason).
  Status flush(std::chrono::steady_clock::time_point deadline);
  [[nodiscard]] KvTransferClientStats stats() const;
  // UCX's description of the connection's lanes (ucp_ep_print_info: which transport carries the
  // active messages and which the rendezvous payloads); complete once the connection is up.
  [[nodiscard]] std::string describe_transport() const;

  struct Impl;

 private:
  explicit KvTransferClient(std::unique_ptr<Impl> impl);
  // Queues a frame: its encoded header (sent under `am_id`), a KV block's fields (its entry when
  // it travels in a batch; unused for weights) and payload.
  Status enqueue(std::span<const std::byte> header, unsigned am_id, const KvFrameHeader& kv,
                 std::vector<std::byte> payload, std::span<const std::byte> borrowed,
                 std::shared_ptr<const void> owner);
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::cluster
