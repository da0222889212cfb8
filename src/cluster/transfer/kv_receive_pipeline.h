// KvReceivePipeline: the KV transfer server's delivery stage — one thread that takes the frames
// the server's UCX thread received and, in the order they arrived, verifies every block's checksum
// and hands the block to the sink. The UCX thread only progresses the transport: it reserves a
// place when a frame's header arrives (reserve), starts the payload's receive into a pooled
// buffer (take_buffer) and completes the place when the payload has landed (complete) or gives
// it up (abandon). A frame is delivered once every place before it is complete or abandoned, so
// blocks reach the sink in arrival order whatever order their receives finish in. A block whose
// payload fails its checksum is dropped and counted alone: the rest of its frame, and every other
// frame, are delivered.
//
// Thread safety: every method from any thread (the UCX thread in the server); the sinks and
// `on_delivered` run on the pipeline's own thread, one call at a time. stop() (and the
// destructor) from any thread but the pipeline's.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <variant>
#include <vector>

#include "cluster/transfer/kv_batch_frame.h"
#include "cluster/transfer/kv_transfer_frame.h"
#include "cluster/transfer/weights_frame.h"
#include "core/mutex.h"

namespace keel::cluster {

// Receives each accepted block or chunk: its header and payload (valid during the call).
using KvBlockSink = std::function<void(const KvFrameHeader&, std::span<const std::byte>)>;
using WeightsChunkSink = std::function<void(const WeightsFrameHeader&, std::span<const std::byte>)>;

// A received frame's header, of either channel; a KV frame carries one block or a batch.
using ReceivedHeader = std::variant<KvFrameHeader, KvBatchHeader, WeightsFrameHeader>;

// The payload bytes a received frame declares.
[[nodiscard]] uint64_t received_payload_bytes(const ReceivedHeader& header);

// A payload buffer from the pipeline's pool: `capacity` bytes, not zeroed.
struct PayloadBuffer {
  std::unique_ptr<std::byte[]> bytes;
  size_t capacity = 0;
};

// A frame whose payload has landed.
struct ReceivedFrame {
  ReceivedHeader header;
  PayloadBuffer buffer;                // holds the payload, unless a placer's destination does
  std::span<const std::byte> payload;  // received_payload_bytes(header) bytes
  std::shared_ptr<void> keep;          // keeps a placer's destination valid until delivered
};

struct KvDeliveryStats {
  int64_t blocks_accepted = 0;    // handed to a sink
  int64_t bytes_accepted = 0;     // their payload bytes
  int64_t rejected_checksum = 0;  // blocks or chunks whose payload failed its checksum
};

class KvReceivePipeline {
 public:
  struct Sinks {
    KvBlockSink kv;            // KV blocks (single or batched frames)
    WeightsChunkSink weights;  // weights chunks
  };
  // Starts the delivery thread. `on_delivered` (may be empty) runs after each delivered or
  // abandoned place: the server wakes its UCX thread with it when it holds receives back.
  KvReceivePipeline(Sinks sinks, std::function<void()> on_delivered);
  KvReceivePipeline(const KvReceivePipeline&) = delete;
  KvReceivePipeline& operator=(const KvReceivePipeline&) = delete;
  ~KvReceivePipeline();  // stop()

  // The next place in delivery order for a frame of `length` payload bytes (counted in the
  // backlog until delivered or abandoned).
  [[nodiscard]] uint64_t reserve(size_t length);
  // The frame for a reserved place: delivered after every place before it.
  void complete(uint64_t ticket, ReceivedFrame frame);
  // A reserved place whose frame will not be delivered (discarded, or its receive failed).
  void abandon(uint64_t ticket);
  // A buffer of at least `length` bytes (a pooled one when one fits).
  [[nodiscard]] PayloadBuffer take_buffer(size_t length);
  // Payload bytes reserved and not yet delivered or abandoned.
  [[nodiscard]] size_t backlog_bytes() const;
  [[nodiscard]] KvDeliveryStats stats() const;
  // Delivers the frames completed in order up to the first place still pending, drops the rest,
  // joins the thread. Idempotent; reserve/complete after it drop their frames.
  void stop();

 private:
  struct Place {
    size_t length = 0;
    bool settled = false;                // completed or abandoned
    std::optional<ReceivedFrame> frame;  // set when completed
  };
  void run();
  void deliver(ReceivedFrame& frame);
  void recycle(PayloadBuffer buffer);

  Sinks sinks_;
  std::function<void()> on_delivered_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<Place> places_ KEEL_GUARDED_BY(mu_);  // from ticket first_ticket_ on
  uint64_t first_ticket_ KEEL_GUARDED_BY(mu_) = 0;
  size_t backlog_ KEEL_GUARDED_BY(mu_) = 0;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::vector<PayloadBuffer> spare_ KEEL_GUARDED_BY(mu_);
  size_t spare_bytes_ KEEL_GUARDED_BY(mu_) = 0;
  KvDeliveryStats stats_ KEEL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace keel::cluster
