// KvEventPublisher: a TE's KV events on the wire exactly as vLLM's ZmqEventPublisher sends them
// (vllm/distributed/kv_events.py, v0.10.x–v0.11.x): a PUB socket sends each batch as the multipart
// message [topic, seq (8 bytes big-endian), payload (kv_event_codec.h)], seq 0, 1, 2, ... per
// batch; a ROUTER replay socket keeps the last `buffer_steps` payloads and answers a request
// [identity, "", start seq (8 bytes big-endian)] with [identity, "", seq, payload] for each
// buffered batch from start seq on, then the end marker [identity, "", seq −1, ""].
// Both sockets bind (port 0 picks a free one; endpoint() reports what was bound).
// Thread safety: publish() may be called from any thread and never blocks — it queues the batch
// for the one publisher thread, which owns both sockets, or drops it (counted) when the queue is
// full or the publisher is shut down. shutdown() sends what is queued, then closes (linger 0).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "cluster/kv_events/kv_event.h"
#include "cluster/kv_events/kv_event_codec.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/status.h"
#include "net/zmq_socket.h"

namespace keel::cluster {

struct KvEventPublisherConfig {
  std::string endpoint = "tcp://127.0.0.1:0";  // PUB socket, bound (vLLM: tcp://*:5557)
  // ROUTER replay socket, bound (vLLM: tcp://*:5558); empty: no replay.
  std::string replay_endpoint = "tcp://127.0.0.1:0";
  std::string topic;             // first frame of every message (vLLM's default: empty)
  int64_t buffer_steps = 10000;  // batches kept for replay (vLLM's default)
  int64_t max_queue = 100000;    // batches waiting for the publisher thread; more are dropped
  int32_t hwm = 100000;          // the PUB socket's send high-water mark (vLLM's default)
  // Stamped into batches that carry none (vLLM stamps its DP rank, 0 by default).
  std::optional<int32_t> data_parallel_rank = 0;
  [[nodiscard]] Status validate() const;
};

struct KvEventPublisherStats {
  int64_t published = 0;        // batches sent (the next seq)
  int64_t dropped = 0;          // batches publish() refused: queue full or shut down
  int64_t replay_requests = 0;  // replay requests answered
};

class KvEventPublisher {
 public:
  // Binds both sockets and starts the publisher thread.
  static Result<std::unique_ptr<KvEventPublisher>> start(KvEventPublisherConfig config);
  ~KvEventPublisher();  // shutdown()
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues `batch` for sending; false (dropped) when the queue is full or after shutdown().
  bool publish(KvEventBatch batch);
  // Sends the queued batches, closes the sockets and joins the thread. Idempotent.
  void shutdown();

  // The bound endpoints, e.g. "tcp://127.0.0.1:40123" (replay: empty when disabled).
  [[nodiscard]] const std::string& endpoint() const { return endpoint_; }
  [[nodiscard]] const std::string& replay_endpoint() const { return replay_endpoint_; }
  [[nodiscard]] KvEventPublisherStats stats() const;

 private:
  KvEventPublisher(KvEventPublisherConfig config, int wake_fd);
  void run();  // the publisher thread
  void send_batch(const KvEventBatch& batch);
  void serve_replay();  // answers every waiting replay request

  KvEventPublisherConfig config_;
  net::ZmqContext ctx_;
  net::ZmqSocket pub_;     // publisher thread only (after start)
  net::ZmqSocket replay_;  // publisher thread only (after start); empty when disabled
  std::string endpoint_;
  std::string replay_endpoint_;
  int wake_fd_;  // eventfd: publish() and shutdown() wake the thread

  // Publisher thread only.
  int64_t next_seq_ = 0;
  std::deque<std::pair<int64_t, Bytes>> buffer_;  // [≤ buffer_steps] (seq, payload), oldest first

  mutable Mutex mu_;
  std::deque<KvEventBatch> queue_ KEEL_GUARDED_BY(mu_);
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> published_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> replay_requests_{0};
  std::thread thread_;
};

}  // namespace keel::cluster
