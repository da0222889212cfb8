// KvHandoff: the prefill side of a disaggregated job. After a prefill task's engine has computed
// the prompt (its blocks published in the prefix cache), the handoff reads each full block of the
// prompt out of the engine (by its prefix key) and pushes it to the decode TE's KV transfer
// server, then reports the outcome. It runs on its own thread (reading a pool block waits for the
// engine thread between steps, so it must not run there) with one KvTransferClient per
// destination, made on first use and dropped when it fails.
//
// What it moves: blocks in prompt order while the engine still holds them; it stops at the first
// block the engine no longer has (the decode side recomputes the rest). A push that fails or
// misses its deadline is reported, not retried: the decode TE recomputes what did not arrive.
// The transfer starts after the prefill's last step (a copy after prefill, not yet layer- or
// block-pipelined).
//
// Thread safety: push() from any thread; the callback runs on the handoff thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "cluster/kv_transfer_client.h"
#include "core/status.h"
#include "kv/block_hash.h"

namespace keel::cluster {

struct KvHandoffConfig {
  kv::BlockHash model_key;    // the engine's model identity (prefix keys)
  kv::BlockHash kv_identity;  // engine::kv_tier_identity (frames)
  int32_t block_size = 16;
  size_t block_bytes = 0;
  // Copies the published block `hash` into `out` (Engine::read_kv_block).
  std::function<Status(const kv::BlockHash& hash, std::span<std::byte> out)> read_block;
  std::chrono::milliseconds deadline{5000};  // per handoff
};

struct KvHandoffResult {
  Status status;
  int64_t blocks = 0;  // blocks pushed and flushed
  int64_t bytes = 0;
  double seconds = 0;  // from the start of the push to the flush
};

class KvHandoff {
 public:
  using Done = std::function<void(const KvHandoffResult&)>;
  explicit KvHandoff(KvHandoffConfig config);
  ~KvHandoff();
  KvHandoff(const KvHandoff&) = delete;
  KvHandoff& operator=(const KvHandoff&) = delete;

  // Queues the push of `prompt`'s full blocks (keys under `cache_salt`) to `destination`
  // ("host:port"); `done` runs when it finished or failed.
  void push(std::vector<int32_t> prompt, std::string cache_salt, std::string destination,
            Done done);

 private:
  struct Item {
    std::vector<int32_t> prompt;
    std::string salt;
    std::string destination;
    Done done;
  };
  void run();
  KvHandoffResult transfer(const Item& item);
  Result<KvTransferClient*> client(const std::string& destination);

  KvHandoffConfig config_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::deque<Item> queue_;
  std::map<std::string, std::unique_ptr<KvTransferClient>> clients_;  // handoff thread only
  std::thread thread_;
};

}  // namespace keel::cluster
