// TierTransfer: the thread that moves KV blocks between the pool and the lower tiers (T1 host,
// T2 disk), so the engine thread never waits on a tier: it reads blocks back for requests waiting
// as "populating" (the other requests keep running), and stores demoted blocks, whose bytes the
// engine has already copied out of the pool. Read payloads are staged in memory; the engine
// copies them into the pool at the next plan's execution (never directly: a pool block may still
// receive a stale write from the step in flight). Jobs run in submission order.
//
// Thread safety: submit() and poll() may be called from any thread (the engine thread does);
// one worker thread runs the reads.
#pragma once

#include <condition_variable>
#include <deque>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "engine/step_plan.h"
#include "engine/types.h"
#include "kv/kv_tiers.h"

namespace keel::engine {

class TierTransfer {
 public:
  static constexpr size_t kDefaultMaxQueuedDemotionBytes = size_t{256} << 20;
  // `tiers` must outlive this object. Demotions queued beyond `max_queued_demotion_bytes` (a tier
  // slower than evictions) are dropped — those blocks are simply not cached — and counted.
  TierTransfer(kv::KvTiers* tiers, size_t payload_bytes,
               size_t max_queued_demotion_bytes = kDefaultMaxQueuedDemotionBytes);
  TierTransfer(const TierTransfer&) = delete;
  TierTransfer& operator=(const TierTransfer&) = delete;
  ~TierTransfer();  // finishes the read in progress, drops the queue, joins

  // Queues reads of `chain` (consecutive blocks of one request) for `key`.
  void submit(RequestKey key, std::vector<kv::BlockHash> chain);
  // Queues a demotion: `payload` (a copy of a pool block) goes to the tiers under `key` (or is
  // dropped when the queue is full, see above).
  void demote(const kv::BlockHash& key, std::vector<std::byte> payload);
  // Demotions dropped because the queue was full.
  [[nodiscard]] int64_t dropped_demotions() const;

  struct Done {
    RequestKey key = 0;
    // The leading blocks of the chain that were read (a read that fails — a damaged copy, or a
    // block evicted meanwhile — ends the run); Promotion::block is left for the caller to fill.
    std::vector<Promotion> promotions;
  };
  // The transfers completed since the last call (non-blocking).
  std::vector<Done> poll();
  // Jobs (reads and demotions) queued or running.
  [[nodiscard]] size_t pending() const;

 private:
  void run();

  kv::KvTiers* tiers_;
  size_t payload_bytes_;
  size_t max_queued_demotion_bytes_;
  mutable Mutex mu_;
  std::condition_variable cv_;
  bool working_ KEEL_GUARDED_BY(mu_) = false;  // a job is running
  size_t queued_demotion_bytes_ KEEL_GUARDED_BY(mu_) = 0;
  int64_t dropped_demotions_ KEEL_GUARDED_BY(mu_) = 0;
  struct Job {
    RequestKey key = 0;                // a read: the request
    std::vector<kv::BlockHash> chain;  // a read: its blocks
    kv::BlockHash demote_key;          // a demotion (when chain is empty)
    std::vector<std::byte> payload;    // a demotion: the block's bytes
  };
  std::deque<Job> jobs_ KEEL_GUARDED_BY(mu_);
  std::vector<Done> done_ KEEL_GUARDED_BY(mu_);
  bool stop_ KEEL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace keel::engine
