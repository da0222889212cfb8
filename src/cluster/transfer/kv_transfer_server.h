// KvTransferServer: the receiving end of the KV transfer service (DeepServe's DistFlow) — a decode
// TE's listener for KV blocks that a prefill TE (or any peer TE, as tier T3) streams to it, or,
// on the weights channel (transfer_channel.h), a TE's listener for a model store entry forked from
// a peer (cluster/weights/weights_receiver.h). Each frame (kv_transfer_frame.h: one block,
// kv_batch_frame.h: several; weights_frame.h) arrives as one UCX active message under its
// channel's id: the frame header as the message header, the payload as its data (rendezvous —
// zero-copy through cma, or RDMA — for large frames). Headers are checked on the UCX thread before
// any payload is received: of the server's channel, well-formed, a KV frame's identity equal to
// the server's, every block of the expected size. Payloads go to a delivery thread
// (kv_receive_pipeline.h) that checks each block's checksum and hands it to the sink, in arrival
// order, so the UCX thread only progresses the transport. A frame or block failing a check is
// dropped and counted; a connection with no frame for `idle_timeout` (a stalled or vanished
// sender) is closed. When more than 64 MB received wait for the sink, new rendezvous frames are
// held (their receive starts later, their order kept). A block that never arrives intact is
// simply not there: the engine recomputes it.
//
// Thread safety: the sinks run on the server's delivery thread, one call at a time (they must not
// block for long; a block is handed on shortly after its sender's flush completed, not before it
// returns); placers on its UCX thread; port() and stats() from any thread; the destructor from
// any thread but the sinks'.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "cluster/transfer/kv_receive_pipeline.h"
#include "cluster/transfer/kv_transfer_frame.h"
#include "cluster/transfer/transfer_channel.h"
#include "cluster/transfer/weights_frame.h"
#include "core/result.h"
#include "core/status.h"
#include "kv/tier_store.h"
#include "ucp/api/ucp.h"

namespace keel::cluster {

// Both ends' endpoint error mode. UCP_ERR_HANDLING_MODE_PEER (UCX detects a vanished peer) rules
// out the shared-memory transports in UCX 1.13 — a same-host transfer would run over TCP — so
// the service relies on its own deadlines instead: the server's idle timeout, the client's flush
// deadline; a force-closed endpoint completes its requests with an error either way.
inline constexpr ucp_err_handling_mode_t kKvTransferErrMode = UCP_ERR_HANDLING_MODE_NONE;

struct KvTransferServerOptions {
  std::string host = "127.0.0.1";  // address to listen on (IPv4 literal or name)
  uint16_t port = 0;               // 0: a free port (see port())
  kv::BlockHash kv_identity;       // engine::kv_tier_identity of the receiving engine
  size_t payload_bytes = 0;        // every KV payload's size (the engine's block bytes); 0: any
  // Set by the start function: kKvBlocks (start) or kWeights (start_weights: a weights-stream
  // receiver, which does not check kv_identity — each stream carries its entry's identity and the
  // sink checks it). A frame of the other channel is rejected as malformed.
  TransferChannel channel = TransferChannel::kKvBlocks;
  // A connection that delivers no frame for this long is closed (its sender sees an error).
  std::chrono::milliseconds idle_timeout{30'000};
  [[nodiscard]] Status validate() const;
};

struct KvTransferServerStats {
  int64_t connections_accepted = 0;
  int64_t connections_open = 0;
  int64_t connections_timed_out = 0;  // closed by idle_timeout
  int64_t blocks_accepted = 0;        // handed to the sink (a batch counts its blocks)
  int64_t bytes_accepted = 0;         // their payload bytes
  int64_t rejected_malformed = 0;     // header did not decode, a payload of the wrong size, or a
                                      // frame of the other channel
  int64_t rejected_identity = 0;      // another model / KV dtype / block size
  int64_t rejected_checksum = 0;      // blocks whose payload failed its checksum
  int64_t receive_errors = 0;         // a payload lost in transit (connection failed mid-frame)
};

// Where an admitted rendezvous payload is received: `dst` (header.payload_bytes writable bytes)
// kept valid by `keep` until the block was handed on — the payload lands there with no copy, and
// the sink is called with a span at `dst`. dst null: the server's own buffer (then the sink
// copies). A payload that fails its checksum is not handed on: `dst` then holds garbage bytes.
// A KV placer sees one-block frames only: a batch lands in the server's buffers.
struct PayloadPlacement {
  std::byte* dst = nullptr;
  std::shared_ptr<void> keep;
};
using KvPayloadPlacer = std::function<PayloadPlacement(const KvFrameHeader&)>;
using WeightsPayloadPlacer = std::function<PayloadPlacement(const WeightsFrameHeader&)>;

// A sink that puts every block into `store` (e.g. the decode engine's host tier T1) under its
// block hash; evicted entries are dropped. `store` must outlive the server.
[[nodiscard]] KvBlockSink tier_store_sink(kv::TierStore* store);

class KvTransferServer {
 public:
  // Listens and starts receiving. Unavailable when UCX cannot start or bind.
  // `placer` (may be empty; on the UCX thread, before the sink) receives payloads in place.
  static Result<std::unique_ptr<KvTransferServer>> start(KvTransferServerOptions options,
                                                         KvBlockSink sink,
                                                         KvPayloadPlacer placer = {});
  // The same on the weights channel: chunks of a weights stream, each handed to `sink`.
  static Result<std::unique_ptr<KvTransferServer>> start_weights(KvTransferServerOptions options,
                                                                 WeightsChunkSink sink,
                                                                 WeightsPayloadPlacer placer = {});
  KvTransferServer(const KvTransferServer&) = delete;
  KvTransferServer& operator=(const KvTransferServer&) = delete;
  // Closes every connection (blocks in flight are dropped), then stops.
  ~KvTransferServer();

  [[nodiscard]] uint16_t port() const;
  [[nodiscard]] KvTransferServerStats stats() const;

  struct Impl;

 private:
  explicit KvTransferServer(std::unique_ptr<Impl> impl);
  static Result<std::unique_ptr<KvTransferServer>> start_impl(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace keel::cluster
