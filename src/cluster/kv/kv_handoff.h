// KvHandoff: the prefill side of a disaggregated job — moves the prompt's KV blocks from a prefill
// TE's engine to the decode TE's KV transfer server, on its own thread, with one KvTransferClient
// per destination (made on first use, dropped when it fails). Two modes (--kv-handoff):
//   stream (default): begin() watches the prompt's block keys (KvHandoffStreams) before the engine
//     computes them; the engine's published-block tap copies each block as a chunked-prefill step
//     publishes it and the thread sends it while later chunks compute. finish() (the prefill's
//     last step is over) sends what is left — the last chunk's blocks, and blocks the engine
//     published before (prefix hits), read the slow way — then flushes.
//   after: finish() reads every block out of the engine (a round trip to the engine thread each)
//     and pushes it: a copy after prefill, kept for comparison.
// Exposed time = end of the prefill's last step → the flush completed (every frame delivered to
// the decode TE's transport); it is what the decode task waits for beyond the prefill.
//
// Failures are reported, never retried: a block not sent, a read that misses (evicted), a send or
// flush that fails or passes its deadline — the decode TE recomputes whatever did not arrive, so
// the output is never wrong and nothing waits past the deadline. While the flush waits, a probe
// (kv_link_probe.h) tells a delayed link (blocks still moving: wait) from a blocked one (none
// moved for blocked_after: fail now, result.link_blocked, and the job continues on the prefill TE).
// Thread safety: begin/finish/abandon from any thread; `done` runs on the handoff thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/kv/kv_handoff_streams.h"
#include "cluster/transfer/kv_transfer_client.h"
#include "core/mutex.h"
#include "core/result.h"
#include "core/status.h"
#include "engine/published_block_tap.h"
#include "kv/block_hash.h"

namespace keel::cluster {

enum class KvHandoffMode { kStream, kAfter };
[[nodiscard]] std::optional<KvHandoffMode> parse_kv_handoff_mode(std::string_view name);
[[nodiscard]] std::string_view kv_handoff_mode_name(KvHandoffMode mode);

// --kv-transfer-fault: faults a prefill TE's handoff injects into its transfers (tests and
// benchmarks), comma-separated: "drop:N" (frame N is never sent), "corrupt:N" (frame N's payload
// has a byte flipped after checksumming), "stall:N" (nothing after N frames is sent: a blocked
// link), "throttle:N" (payloads leave at N bytes/s: a delayed link). Frames count from 0 per
// connection. "" = none; InvalidArgument for anything else.
[[nodiscard]] Result<KvTransferFaults> parse_kv_transfer_faults(std::string_view spec);

struct KvHandoffConfig {
  KvHandoffMode mode = KvHandoffMode::kStream;
  kv::BlockHash model_key;    // the engine's model identity (prefix keys)
  kv::BlockHash kv_identity;  // engine::kv_tier_identity (frames)
  int32_t block_size = 16;
  size_t block_bytes = 0;
  // Copies the published block `hash` into `out` (engine::KvConnector::read_block).
  std::function<Status(const kv::BlockHash& hash, std::span<std::byte> out)> read_block;
  // Stream mode: the watch list the engine's tap (KvHandoff::tap) feeds; must outlive the handoff.
  KvHandoffStreams* streams = nullptr;
  std::chrono::milliseconds deadline{5000};  // finish() → flushed
  // The KV-link probe (kv_link_probe.h): no block sent for this long while the flush waits means
  // the link is blocked, and the handoff fails at once instead of at the deadline.
  std::chrono::milliseconds blocked_after{1000};
  KvTransferFaults faults;  // injected into every client (tests, benchmarks)
};

struct KvHandoffResult {
  Status status;
  int64_t blocks = 0;    // blocks sent (flushed when status is ok)
  int64_t streamed = 0;  // of which copied out by the tap (stream mode); the rest read at finish
  int64_t bytes = 0;
  double exposed_seconds = 0;  // prefill_end → flushed (or failed)
  bool link_blocked = false;   // failed because the probe found the link blocked
};

// The tap a stream-mode prefill engine needs (EngineDeps::published_blocks) over `streams`.
[[nodiscard]] engine::PublishedBlockTap handoff_tap(KvHandoffStreams* streams);

class KvHandoff {
 public:
  using Done = std::function<void(const KvHandoffResult&)>;
  using Clock = std::chrono::steady_clock;
  explicit KvHandoff(KvHandoffConfig config);
  ~KvHandoff();
  KvHandoff(const KvHandoff&) = delete;
  KvHandoff& operator=(const KvHandoff&) = delete;

  [[nodiscard]] KvHandoffMode mode() const { return config_.mode; }
  // Before the prefill task is submitted: the handoff of `prompt`'s full blocks (keys under
  // `cache_salt`) to `destination` ("host:port"). Returns its id for finish()/abandon().
  int64_t begin(const std::vector<int32_t>& prompt, const std::string& cache_salt,
                std::string destination);
  // The prefill's last step ended at `prefill_end`: completes handoff `id`; `done` runs when it
  // is flushed or failed.
  void finish(int64_t id, Clock::time_point prefill_end, Done done);
  // The prefill ended without a token to hand off (aborted, failed): forgets handoff `id`.
  void abandon(int64_t id);

 private:
  struct Handoff {
    std::vector<kv::BlockHash> keys;
    std::string destination;
    int64_t connection = -1;  // serial of the client its blocks went over (-1: none yet)
    KvHandoffResult result;
  };
  struct Command {
    enum class Kind { kBegin, kFinish, kAbandon } kind;
    int64_t id = 0;
    Handoff begin;  // kBegin
    Clock::time_point prefill_end{};
    Done done;
  };
  struct Connection {
    std::unique_ptr<KvTransferClient> client;
    int64_t serial = 0;
  };
  void run();
  void send_caught();                          // stream mode: every open handoff
  void send(Handoff& h, KvBlockToSend block);  // one block, over h's connection
  void complete(int64_t id, Handoff& h, const Command& c);
  Result<Connection*> connection(const std::string& destination);
  Status flush_probed(KvTransferClient& client, KvHandoffResult* r);

  KvHandoffConfig config_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  bool caught_ KEEL_GUARDED_BY(mu_) = false;  // the tap caught blocks since the last look
  std::deque<Command> commands_ KEEL_GUARDED_BY(mu_);
  int64_t next_id_ KEEL_GUARDED_BY(mu_) = 1;
  // Handoff thread only.
  std::map<int64_t, Handoff> open_;
  std::map<std::string, Connection> clients_;
  int64_t next_serial_ = 1;
  std::thread thread_;
};

}  // namespace keel::cluster
