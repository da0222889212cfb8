// KvEventSubscriber: receives the KV events of one or many publishers (KvEventPublisher or vLLM's
// ZmqEventPublisher) and delivers each publisher's batches to a callback exactly in sequence
// order. One SUB socket per source; a batch whose seq skips ahead is a gap, filled first from the
// source's replay socket (a DEALER sends ["", start seq] and reads ["", seq, payload] up to the
// end marker seq −1); what the replay no longer holds is counted as lost and skipped. A seq below
// the next expected one on the live stream means the publisher restarted (its numbering starts at
// 0 again): the callback gets a synthetic AllBlocksCleared batch with seq −1 — the TE's cache is
// gone — and the new stream from seq 0 (replayed as far as needed). (A restarted publisher that
// has already passed the old stream's seq when the subscriber reconnects looks like a gap: seqs
// alone cannot tell.) libzmq reconnects by itself. A source quiet for catch_up_ms is asked its
// replay socket for anything from the next expected seq on: a batch published before the
// subscription took effect (ZeroMQ's slow joiner) with nothing after it would otherwise wait for
// the next batch to reveal the gap. The first catch-up comes 50 ms after the subscription (the
// SUB socket is connected by then); each that finds nothing doubles the quiet time before the
// next, up to 64 × catch_up_ms, and one that delivers resets it to catch_up_ms. A catch-up waits
// at most 100 ms for its answer (a gone source costs that once per backed-off interval). A live
// batch the catch-up already delivered (it was in flight meanwhile) is dropped as a duplicate, not
// taken for a restart, for one second after it. Thread safety: one subscriber thread owns the
// sockets and runs the callback (which must not call stop()); stop() and stats() may be called from
// any thread. A replay blocks that thread (other sources wait) for at most replay_timeout_ms.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cluster/kv_events/kv_event.h"
#include "core/result.h"
#include "core/status.h"
#include "net/zmq_socket.h"

namespace keel::cluster {

struct KvEventSource {
  std::string te_id;            // passed to the callback
  std::string endpoint;         // the publisher's PUB endpoint (connected)
  std::string replay_endpoint;  // its ROUTER replay endpoint; empty: gaps are not filled
};

struct KvEventSubscriberConfig {
  std::vector<KvEventSource> sources;  // at least one
  std::string topic;                   // subscription prefix ("" = everything)
  // The first seq expected of each source: a later first batch is a gap filled from the replay
  // (so a subscriber that joins late still sees the buffered history). −1: start wherever the
  // stream is.
  int64_t start_seq = 0;
  int32_t replay_timeout_ms = 1000;  // how long one replay may take
  int32_t poll_interval_ms = 20;     // how often the thread checks for stop()
  int32_t catch_up_ms = 500;         // a source quiet this long is asked for what it has; 0: never
  [[nodiscard]] Status validate() const;
};

struct KvEventSubscriberStats {
  int64_t delivered = 0;      // batches passed to the callback (synthetic ones excluded)
  int64_t replayed = 0;       // of those, batches that came from a replay
  int64_t lost = 0;           // seqs skipped: neither received nor replayed
  int64_t decode_errors = 0;  // malformed messages or payloads (skipped)
  int64_t restarts = 0;       // publisher restarts detected
  int64_t duplicates = 0;     // live batches a catch-up had already delivered (dropped)
};

// (te_id, seq, batch), on the subscriber thread; seq −1: a synthetic batch (publisher restart).
using KvEventCallback =
    std::function<void(const std::string& te_id, int64_t seq, const KvEventBatch& batch)>;

class KvEventSubscriber {
 public:
  static Result<std::unique_ptr<KvEventSubscriber>> start(KvEventSubscriberConfig config,
                                                          KvEventCallback callback);
  ~KvEventSubscriber();  // stop()
  KvEventSubscriber(const KvEventSubscriber&) = delete;
  KvEventSubscriber& operator=(const KvEventSubscriber&) = delete;

  // Stops the thread (within about poll_interval_ms) and closes the sockets. Idempotent.
  void stop();
  [[nodiscard]] KvEventSubscriberStats stats() const;

 private:
  struct Source {
    KvEventSource info;
    net::ZmqSocket sub;
    int64_t next_seq = -1;  // the next seq to deliver; −1: take whatever comes first
    std::chrono::steady_clock::time_point heard;         // the last live batch or catch-up
    int64_t quiet_ms = 0;                                // before the next catch-up
    int64_t caught_up_from = -1;                         // the first seq the last catch-up gave
    std::chrono::steady_clock::time_point caught_up_at;  // when it did
  };

  KvEventSubscriber(KvEventSubscriberConfig config, KvEventCallback callback);
  void run();
  void on_message(Source& src, const std::vector<std::string>& frames);
  // Asks a source quiet for catch_up_ms for what it has from next_seq on.
  void catch_up(Source& src);
  // Delivers src's batches [src.next_seq, until) from its replay socket, as far as it has them,
  // waiting at most timeout_ms for them.
  void replay(Source& src, int64_t until, int32_t timeout_ms);
  void deliver(Source& src, int64_t seq, std::string_view payload, bool replayed);

  KvEventSubscriberConfig config_;
  KvEventCallback callback_;
  net::ZmqContext ctx_;
  std::vector<Source> sources_;  // subscriber thread only (after start)
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> delivered_{0};
  std::atomic<int64_t> replayed_{0};
  std::atomic<int64_t> lost_{0};
  std::atomic<int64_t> decode_errors_{0};
  std::atomic<int64_t> restarts_{0};
  std::atomic<int64_t> duplicates_{0};
  std::thread thread_;
};

}  // namespace keel::cluster
