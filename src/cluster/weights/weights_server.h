// WeightsServer: a TE's weights service — the serving side of a fork. Answers `weights_fetch`
// calls (weights_stream.h) on a link listener: the entry named in the call is pushed to the
// caller's WeightsReceiver in chunks, sent with no copy straight from a read-only shared mapping
// of the entry file in this host's store directory (the same pages the TE's model runs from); when
// this TE is itself still receiving that entry (a chain relay), the call is handed to its
// WeightsReceiver, which forwards chunks as they arrive. A probe call pushes zero bytes under the
// probe identity. The whole entry's XXH3-64 goes in every chunk and the reply; it is computed once
// per entry.
//
// Fault hooks (tests): flip_chunk flips one byte of that chunk before it is checksummed (the
// frame arrives intact, the entry's hash does not match at the end); stop_after_chunks sends
// only that many chunks and still replies with the whole size (a truncated stream);
// throttle_bytes_per_s paces the push (a slow link).
//
// Thread safety: handlers on the links' reader threads (concurrent calls are served
// concurrently); stop() from the owner.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/weights/weights_receiver.h"
#include "cluster/weights/weights_stream.h"
#include "core/mutex.h"
#include "core/result.h"
#include "net/link.h"
#include "net/link_server.h"

namespace keel::cluster {

struct WeightsFaults {
  int64_t flip_chunk = -1;
  int64_t stop_after_chunks = -1;
  double throttle_bytes_per_s = 0;  // > 0: a slow link (the transfer client's throttle)
};

// "flip:N" | "stop:N" | "" → faults; InvalidArgument otherwise.
[[nodiscard]] Result<WeightsFaults> parse_weights_faults(const std::string& spec);

struct WeightsServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 0;
  std::string store_dir;                        // where the entries it serves live
  WeightsReceiver* receiver = nullptr;          // this TE's receiver (chain relay); may be null
  std::chrono::milliseconds deadline{120'000};  // per call: pushed and flushed by then
  // A call for an entry this TE has not got waits this long for its receiver to begin receiving
  // it (a chain's TEs are bound at the same moment; the upstream one may not have begun yet).
  std::chrono::milliseconds relay_wait{10'000};
  WeightsFaults faults;
};

struct WeightsServerStats {
  int64_t served = 0;   // entries pushed whole from the store
  int64_t relayed = 0;  // calls answered by relaying a stream still arriving
  int64_t probes = 0;
  int64_t failed = 0;
  int64_t bytes = 0;  // pushed from the store (relays not counted)
};

class WeightsServer {
 public:
  static Result<std::unique_ptr<WeightsServer>> start(WeightsServerConfig config);
  ~WeightsServer();
  WeightsServer(const WeightsServer&) = delete;
  WeightsServer& operator=(const WeightsServer&) = delete;

  [[nodiscard]] std::string address() const { return server_->address(); }
  [[nodiscard]] uint16_t port() const { return server_->port(); }
  [[nodiscard]] WeightsServerStats stats() const;
  // Computes `entry`'s hash now, on a thread of its own (a TE that just mapped its entry), so a
  // first fork does not wait for it.
  void precompute_hash(const std::string& entry);
  void stop();

 private:
  explicit WeightsServer(WeightsServerConfig config) : config_(std::move(config)) {}
  void on_message(net::Link& link, net::Message message);
  Result<WeightsFetchReply> serve(const WeightsFetchRequest& request);
  // What a push sends from: bytes kept valid by owner (the sends in flight hold it).
  struct PushSource {
    std::shared_ptr<const void> owner;
    const std::byte* bytes = nullptr;
    bool repeat = false;  // one chunk at `bytes`, sent as every chunk (the zero probe)
  };
  Result<WeightsFetchReply> push(const WeightsFetchRequest& request, const PushSource& source,
                                 uint64_t total, uint64_t entry_hash);
  Result<uint64_t> entry_hash(const std::string& entry, const std::byte* bytes, uint64_t total);

  WeightsServerConfig config_;
  std::unique_ptr<net::LinkServer> server_;
  mutable Mutex mu_;
  bool stopped_ KEEL_GUARDED_BY(mu_) = false;
  std::map<std::string, uint64_t> hashes_ KEEL_GUARDED_BY(mu_);  // entry → XXH3-64
  std::vector<std::thread> hashers_;  // precompute_hash's, joined by stop()
  WeightsServerStats stats_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::cluster
