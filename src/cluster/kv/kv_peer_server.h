// KvPeerServer: a TE's KV fetch service — the serving side of tier T3. A peer TE calls
// `kv_fetch` (messages.h) over a link: "push me these blocks of your cache". The server reads
// each block off the engine (read_block: engine::KvConnector::read_block, which waits for the
// engine thread between steps, so it runs here on the link's reader thread, never on the engine
// thread), pushes it back to the caller's KV transfer server with a KvTransferClient (frames
// identity-stamped and checksummed as every push), stops at the first block it lacks, flushes, and
// replies with the number of blocks pushed. A probe request pushes dummy blocks under
// kPeerProbeHash instead, so the caller can time the link. The reply always comes, by the fetch
// deadline at the latest.
//
// Fault hook: throttle_bytes_per_s > 0 paces every fetch — block i leaves no earlier than
// (bytes of blocks 0..i) / throttle after the fetch began — a slow link for tests and benchmarks.
// Requests for another engine identity are refused (InvalidArgument), never answered with
// blocks of the wrong model.
//
// Thread safety: start/stop from the owner; handlers on the links' reader threads, one fetch at a
// time (the transfer clients are shared); stats() from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "cluster/transfer/kv_transfer_client.h"
#include "core/mutex.h"
#include "core/result.h"
#include "net/link.h"
#include "net/link_server.h"

namespace keel::cluster {

// The key of a probe block (no prefix key takes this value but with probability 2^-128); the
// receiving TE drops such blocks instead of filing them.
inline constexpr kv::BlockHash kPeerProbeHash{0x6b65656c2d70726fULL, 0x62652d6b762d7433ULL};

struct KvPeerServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 0;           // 0: a free port
  kv::BlockHash kv_identity;   // engine::kv_tier_identity of the serving engine
  uint32_t block_tokens = 16;  // tokens per block
  size_t block_bytes = 0;      // the engine's block payload bytes (> 0)
  // Copies the block `hash` (pool or tiers) into `out`; an error means "not held".
  std::function<Status(const kv::BlockHash& hash, std::span<std::byte> out)> read_block;
  double throttle_bytes_per_s = 0;           // fault hook (see above); 0 = none
  std::chrono::milliseconds deadline{3000};  // per fetch: pushes flushed by then, or it fails
  [[nodiscard]] Status validate() const;
};

struct KvPeerServerStats {
  int64_t fetches = 0;        // kv_fetch calls answered with blocks or a probe
  int64_t blocks_served = 0;  // real blocks pushed and flushed
  int64_t probes = 0;         // probe calls answered (and pings: a fetch of no blocks)
  int64_t refused = 0;        // malformed, wrong identity, unreachable caller, failed push
};

class KvPeerServer {
 public:
  static Result<std::unique_ptr<KvPeerServer>> start(KvPeerServerConfig config);
  ~KvPeerServer();
  KvPeerServer(const KvPeerServer&) = delete;
  KvPeerServer& operator=(const KvPeerServer&) = delete;

  [[nodiscard]] std::string address() const { return server_->address(); }
  [[nodiscard]] KvPeerServerStats stats() const;
  // Stops accepting, closes every link. Idempotent.
  void stop();

 private:
  explicit KvPeerServer(KvPeerServerConfig config) : config_(std::move(config)) {}
  void on_message(net::Link& link, net::Message message);
  // Pushes the request's blocks (or probe blocks); the number pushed and flushed.
  Result<int64_t> serve(const KvFetchRequest& request);
  Result<KvTransferClient*> client(const std::string& destination) KEEL_REQUIRES(serve_mu_);

  KvPeerServerConfig config_;
  std::unique_ptr<net::LinkServer> server_;
  Mutex serve_mu_;  // one fetch at a time
  std::map<std::string, std::unique_ptr<KvTransferClient>> clients_ KEEL_GUARDED_BY(serve_mu_);
  mutable Mutex stats_mu_;
  KvPeerServerStats stats_ KEEL_GUARDED_BY(stats_mu_);
};

}  // namespace keel::cluster
