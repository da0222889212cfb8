// KvPeerFetcher: the fetching side of tier T3 — a TE pulling the prompt's leading blocks from a
// peer TE's cache (the JE's PeerHint names the peer) into its own host tier T1 before the engine
// admits the request, where the engine's admission (prefix lookup → blocks_to_fetch → promotion)
// finds them as tier hits.
//
// The decision is the cost model's (kv::peer_blocks_to_fetch): fetching the hinted run costs the
// link's measured latency + bytes × seconds-per-byte, recomputing it costs its tokens × the
// engine's measured prefill seconds per token. The link cost is measured when the fetcher first
// meets a peer (a warm-up ping, a timed ping = latency, a timed probe of probe_blocks dummy
// blocks = seconds per byte) and updated from every fetch it observes.
//
// A fetch asks the peer's KvPeerServer (kv_fetch call) to push the blocks to this TE's KV
// transfer server; the transfer server's sink files each block in T1 and then calls
// on_block_filed(), which is how fetch() learns what arrived. Every wait is bounded (all of one
// fetch by max_wait): a slow, dead or lying peer costs at most that, and whatever did not arrive
// intact is simply recomputed — never wrong output.
//
// Thread safety: every public method from any thread (fetch() blocks its caller, a TE link's
// reader thread; on_block_filed() runs on the transfer server's delivery thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cluster/protocol/messages.h"
#include "core/mutex.h"
#include "kv/block_hash.h"
#include "kv/tier_cost.h"
#include "net/link.h"

namespace keel::cluster {

struct KvPeerFetchConfig {
  kv::BlockHash model_key;    // the engine's model identity (prefix keys)
  kv::BlockHash kv_identity;  // engine::kv_tier_identity (frames, requests)
  int32_t block_size = 16;
  size_t block_bytes = 0;
  std::string reply_to;  // this TE's KV transfer server ("host:port"), where peers push
  // The engine's measured prefill seconds per token (≤ 0: not measured yet → fetch).
  std::function<double()> prefill_seconds_per_token;
  // One fetch() in all — connecting and probing a new peer, the call, the arrivals — ends by
  // then (under the JE's 5 s task call timeout: the fetch holds up the task's submit reply).
  std::chrono::milliseconds max_wait{2000};
  std::chrono::milliseconds arrival_grace{500};  // after the reply, for the sink to file them
  int32_t probe_blocks = 1;                      // dummy blocks of the link-cost probe
};

// Counters (monotonic). A hinted request is counted once, by its decision.
struct KvPeerFetchStats {
  int64_t decisions_fetch = 0;      // the cost model chose to fetch from the peer
  int64_t decisions_recompute = 0;  // ... chose to recompute the hinted blocks
  int64_t blocks_fetched = 0;       // blocks that arrived and were filed in T1
  int64_t hit_tokens = 0;           // their tokens (blocks_fetched × block_size)
  int64_t failures = 0;             // peer unreachable, call failed or timed out
  int64_t probes = 0;               // link-cost measurements (one per peer connection)
};

// What one fetch() did.
struct PeerFetchOutcome {
  bool fetched = false;       // the cost model chose fetching (and it was attempted)
  int32_t hinted_blocks = 0;  // blocks the hint offered beyond the TE's own
  int32_t blocks = 0;         // blocks that arrived (filed in T1)
  Status status;              // why a chosen fetch fell short (the rest is recomputed)
};

class KvPeerFetcher {
 public:
  explicit KvPeerFetcher(KvPeerFetchConfig config);
  ~KvPeerFetcher();
  KvPeerFetcher(const KvPeerFetcher&) = delete;
  KvPeerFetcher& operator=(const KvPeerFetcher&) = delete;

  // Decides and (maybe) fetches the hinted blocks of `prompt` (keys under `cache_salt`); returns
  // once they are filed or the bounded waits ran out.
  PeerFetchOutcome fetch(const PeerHint& hint, std::span<const int32_t> prompt,
                         const std::string& cache_salt);
  // The transfer server's sink filed `hash` in T1 (or received a probe block: see
  // kPeerProbeHash, which the sink must not file).
  void on_block_filed(const kv::BlockHash& hash);

  [[nodiscard]] KvPeerFetchStats stats() const;
  // The measured cost of the link to `address`, when it has been measured.
  [[nodiscard]] std::optional<kv::TierCost> link_cost(const std::string& address) const;

 private:
  struct Peer {
    std::shared_ptr<net::Link> link;
    kv::TierCost cost;
  };
  struct Waiter {
    std::vector<kv::BlockHash> keys;  // awaited, in order
    std::vector<bool> arrived;        // parallel to keys
    int32_t num_arrived = 0;
  };
  // The connected, measured peer (connects and probes on first use, or after a failure).
  using Deadline = std::chrono::steady_clock::time_point;
  Result<Peer> peer(const std::string& address, Deadline deadline);
  Result<Peer> connect_and_probe(const std::string& address, Deadline deadline);
  // A kv_fetch call; the blocks the peer says it pushed, and the seconds it took.
  static Result<int64_t> call(net::Link& link, const KvFetchRequest& request, Deadline deadline,
                              double* seconds);
  void drop_peer(const std::string& address);

  KvPeerFetchConfig config_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Peer> peers_ KEEL_GUARDED_BY(mu_);
  std::vector<Waiter*> waiters_ KEEL_GUARDED_BY(mu_);
  KvPeerFetchStats stats_ KEEL_GUARDED_BY(mu_);
};

}  // namespace keel::cluster
