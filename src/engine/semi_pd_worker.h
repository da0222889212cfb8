// SemiPdWorker: one of semi-PD's two workers — a thread with its own waiting and running queues,
// its own compute thread pool pinned to its core set, and its own forward-pass scratch, over the
// model and KV storage the engine shares. The prefill worker computes prompts (chunked, FCFS) and
// samples each request's first token, then hands the request — block table and all — to the
// decode worker; the decode worker runs one token per running request per step and, when the pool
// has no block for a request's next position, preempts its newest request back to prefill (by
// recompute: its blocks are released and prefill recomputes prompt + generated tokens).
//
// Step boundaries: between two iterations the worker takes its inbox (requests, hand-offs), checks
// cancellations and applies a new core set asked by set_cores(): a helper thread builds the new
// pool (its threads pinned) while the worker keeps computing on the old one (delayed, asynchronous
// switching); at the first boundary after it is ready the worker takes it over — the time of that
// take-over is the switch downtime (SemiPdShared::switch_seconds).
//
// Thread safety: push(), set_cores(), stop() and the counters from any thread; everything else is
// the worker thread's.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "core/thread_pool.h"
#include "engine/semi_pd_request.h"
#include "kernels/kernels.h"
#include "model/context.h"

namespace keel::engine {

enum class SemiPdRole { kPrefill, kDecode };

class SemiPdWorker {
 public:
  // `shared` is borrowed and outlives the worker; `cores` non-empty.
  SemiPdWorker(SemiPdRole role, const SemiPdShared* shared, kernels::Isa isa,
               std::vector<int> cores);
  SemiPdWorker(const SemiPdWorker&) = delete;
  SemiPdWorker& operator=(const SemiPdWorker&) = delete;
  ~SemiPdWorker();  // stop(), join() and abort_left()

  // Starts the thread; `peer` (borrowed) gets hand-offs (prefill → decode) or preempted requests
  // (decode → prefill).
  void start(SemiPdWorker* peer);
  // Queues a request (at the front: a preempted one, before newer arrivals).
  void push(std::unique_ptr<SemiPdRequest> r, bool front = false);
  // The core set from the next step boundary on (non-empty).
  void set_cores(std::vector<int> cores);
  // Wakes the thread to look at cancellations.
  void wake();
  void stop();
  // Waits for the thread to end (after stop()).
  void join();
  // After join() (of both workers: a peer may still push): finishes every request left here —
  // queued, running or in the inbox — with kAbort.
  void abort_left();

  [[nodiscard]] int32_t num_waiting() const { return num_waiting_.load(); }
  [[nodiscard]] int32_t num_running() const { return num_running_.load(); }
  [[nodiscard]] int32_t num_threads() const { return num_threads_.load(); }
  [[nodiscard]] int64_t num_steps() const { return num_steps_.load(); }
  [[nodiscard]] int64_t num_preemptions() const { return num_preemptions_.load(); }

 private:
  struct Scheduled {
    SemiPdRequest* r;
    int32_t n;     // tokens computed this step
    bool samples;  // its last token asks for logits
  };

  void run();
  // Takes the inbox — blocking while idle, or briefly when the last step did no work (blocked on
  // KV blocks) — false when stopping.
  bool take_inbox(bool worked);
  // A new core set asked by set_cores(): at start-up the pool is built here; later it is built on
  // a helper thread while this worker keeps computing, and taken over at the first step boundary
  // after it is ready (the switch downtime is that take-over).
  void apply_cores();
  struct PreparedPool {
    std::unique_ptr<ThreadPool> pool;
    std::vector<int> cores;
  };
  void take_pool(PreparedPool p);
  void drop_cancelled();
  // One iteration of this worker's role; false when it computed nothing.
  bool prefill_step();
  bool decode_step();
  // Forward pass over `batch`, then the sampled tokens of each scheduled request with `samples`
  // (in order). False (and every scheduled request finished with kError) on a failed pass.
  bool forward(const model::Batch& batch, const std::vector<Scheduled>& sched,
               std::vector<std::pair<int32_t, std::optional<sampling::Logprobs>>>* tokens);
  // Appends a sampled token and sends its event; false when the request finished.
  bool emit(SemiPdRequest& r, int32_t token, std::optional<sampling::Logprobs> logprobs);
  void finish(SemiPdRequest& r, FinishReason reason, TokenEvent event);
  void hand_off(std::unique_ptr<SemiPdRequest> r);
  void admit_prefills();
  void publish_counts();

  const SemiPdRole role_;
  const SemiPdShared* shared_;
  const kernels::Isa isa_;
  SemiPdWorker* peer_ = nullptr;

  mutable Mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<SemiPdRequest>> inbox_ KEEL_GUARDED_BY(mu_);
  std::deque<std::unique_ptr<SemiPdRequest>> inbox_front_ KEEL_GUARDED_BY(mu_);  // preempted
  std::vector<int> next_cores_ KEEL_GUARDED_BY(mu_);  // empty = no change
  bool wake_ KEEL_GUARDED_BY(mu_) = false;
  bool stop_ KEEL_GUARDED_BY(mu_) = false;

  // Worker thread only.
  std::vector<int> cores_;
  std::deque<std::unique_ptr<SemiPdRequest>> waiting_;
  std::vector<std::unique_ptr<SemiPdRequest>> running_;  // admission order
  std::unique_ptr<ThreadPool> pool_;
  std::future<PreparedPool> preparing_;  // the next pool, being built
  std::unique_ptr<kernels::Ops> ops_;
  std::unique_ptr<model::Context> ctx_;
  std::vector<float> logits_;

  std::atomic<int32_t> num_waiting_{0};
  std::atomic<int32_t> num_running_{0};
  std::atomic<int32_t> num_threads_{0};
  std::atomic<int64_t> num_steps_{0};
  std::atomic<int64_t> num_preemptions_{0};
  std::thread thread_;
};

}  // namespace keel::engine
