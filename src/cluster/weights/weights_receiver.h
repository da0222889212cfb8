// WeightsReceiver: a TE's receiving end of a weights stream (weights_stream.h) — a transfer
// server on the weights channel (transfer/transfer_channel.h) whose sink writes each chunk into a
// partial store entry in this host's store directory, and, for a chain relay, forwards it at once
// to the next TE downstream.
//
// One stream at a time (a TE forks once): begin(entry) creates ".<entry>.partial.<pid>" (the
// store's own temporary name) in the store directory; chunks of that entry's stream (identity,
// stream id and sizes checked; anything else is dropped and counted) are received by UCX straight
// into the file's shared mapping at their offset (no intermediate buffer; the first chunk sizes
// the file, and a thread allocates its pages ahead of the chunks), at most once per offset. The
// whole-file XXH3-64 is computed while the stream arrives (weights_hasher.h, over the in-order
// prefix). finish(reply) waits for the upstream's bytes, then checks that every byte arrived and
// that the whole file hashes to the entry hash the chunks and the reply carry; only then is the
// file made read-only (0444) and renamed to its entry name. Any failure —
// a truncated stream, a hash mismatch, an upstream error, a deadline — deletes the partial file:
// a partial entry is never left under an entry name.
//
// Chain relay: relay(request) (the WeightsServer, when a downstream TE asks for the entry this TE
// is still receiving) sends the chunks received so far from the mapping, and every later chunk as
// the sink files it — straight from the mapping, with the checksum its frame arrived with; it
// answers once this TE's own stream completed and the downstream flushed.
//
// Thread safety: the sink runs on the server's delivery thread; begin/finish/abort from the
// fetching thread; relay from the WeightsServer's link threads; all under one mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cluster/transfer/kv_transfer_client.h"
#include "cluster/transfer/kv_transfer_server.h"
#include "cluster/weights/weights_stream.h"
#include "core/mutex.h"
#include "core/result.h"

namespace keel::cluster {

struct WeightsReceiverStats {
  int64_t chunks = 0;           // filed into the partial entry
  int64_t bytes = 0;            // their bytes
  int64_t probe_bytes = 0;      // probe chunks' bytes (dropped)
  int64_t rejected = 0;         // chunks of no open stream, another entry or outside the stream
  int64_t relayed_chunks = 0;   // forwarded downstream (caught up at a relay's start, or live)
  int64_t in_place_chunks = 0;  // of `chunks`, received straight into the entry's mapping
};

class WeightsReceiver {
 public:
  // Listens on host (port 0: a free one); partial and final entries go to store_dir.
  static Result<std::unique_ptr<WeightsReceiver>> start(const std::string& host,
                                                        std::string store_dir);
  ~WeightsReceiver();
  WeightsReceiver(const WeightsReceiver&) = delete;
  WeightsReceiver& operator=(const WeightsReceiver&) = delete;

  // The transfer server's "host:port" (a weights_fetch's reply_to).
  [[nodiscard]] const std::string& address() const { return address_; }
  [[nodiscard]] const std::string& store_dir() const { return store_dir_; }

  // Opens the stream for `entry` under `stream_id`. Unavailable when one is open.
  Status begin(const std::string& entry, uint64_t stream_id);
  // Waits (until `deadline`, at most 2 s: the upstream replies after its flush) for the bytes
  // the upstream's `reply` says it pushed, checks them and renames the entry into place: its
  // path. On any failure the partial file is deleted.
  Result<std::string> finish(const WeightsFetchReply& reply,
                             std::chrono::steady_clock::time_point deadline);
  // Ends the open stream (if any) with `why`, deleting its partial file.
  void abort(const Status& why);

  // Forwards the stream of `request.entry` (open now or within `begin_wait`) to
  // request.reply_to; see above. Returns once this TE's own copy completed (or failed) and the
  // downstream flushed; NotFound when no such stream opened in time.
  Result<WeightsFetchReply> relay(const WeightsFetchRequest& request,
                                  std::chrono::steady_clock::time_point deadline,
                                  std::chrono::milliseconds begin_wait);

  [[nodiscard]] WeightsReceiverStats stats() const;

 private:
  struct Stream;
  WeightsReceiver(std::string store_dir) : store_dir_(std::move(store_dir)) {}
  void on_chunk(const WeightsFrameHeader& header, std::span<const std::byte> payload);
  PayloadPlacement place(const WeightsFrameHeader& header);
  Stream* stream_for_locked(const WeightsFrameHeader& header, const WeightsChunk& c,
                            uint64_t payload_bytes) KEEL_REQUIRES(mu_);
  bool size_stream_locked(Stream& s, const WeightsChunk& c) KEEL_REQUIRES(mu_);
  void close_stream_locked(const Status& why) KEEL_REQUIRES(mu_);

  std::string store_dir_;
  std::string address_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::shared_ptr<Stream> stream_ KEEL_GUARDED_BY(mu_);  // null when none is open (relays hold it)
  WeightsReceiverStats stats_ KEEL_GUARDED_BY(mu_);
  std::unique_ptr<KvTransferServer> server_;  // last member: its sink runs until it is gone
};

}  // namespace keel::cluster
