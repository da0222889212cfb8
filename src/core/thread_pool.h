// ThreadPool: a fixed set of persistent workers that run one parallel job at a time. The caller
// of run() takes part as thread 0, so a pool of N threads starts N-1 workers. Waiting threads
// (workers between jobs, the caller for the last worker) spin for a bounded time — keeping
// per-op dispatch cost in the microseconds — and then sleep on a futex, so a core shared with
// another process is handed back quickly (and the kernel can move a preempted worker onto the
// core a sleeper left idle). parallel_for hands out chunks dynamically, so a thread that is
// descheduled mid-job delays the job by at most the chunk it holds, not by a static slice.
//
// Thread safety: run() may be called from one thread at a time (the pool's owner); it is not
// re-entrant (a job must not call run() on the same pool). One pool per engine, passed in.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace keel {

class ThreadPool {
 public:
  // num_threads ≥ 1 counts the caller; 0 means "all hardware threads".
  explicit ThreadPool(int num_threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  [[nodiscard]] int num_threads() const { return num_threads_; }

  // Calls fn(thread_idx, num_threads) once on each thread and returns when all calls returned.
  template <typename F>
  void run(F&& fn) {
    run_job(&invoke<std::remove_reference_t<F>>, &fn);
  }

  // Covers [0, n) with calls fn(begin, end) on the pool's threads, each range a multiple of
  // `grain` long (except the last) and starting at a multiple of it. Ranges are chunks of about
  // 1/(kChunksPerThread·num_threads) of the work, taken by whichever thread is free, so which
  // thread runs which range is not fixed: fn must not depend on it.
  static constexpr int kChunksPerThread = 4;
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    const int64_t blocks = (n + grain - 1) / grain;
    if (num_threads_ == 1 || blocks == 1) {
      fn(int64_t{0}, n);
      return;
    }
    const int64_t chunk = std::max<int64_t>(1, blocks / (kChunksPerThread * num_threads_));
    std::atomic<int64_t> next{0};
    run([&](int, int) {
      for (;;) {
        const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
        if (b >= blocks) return;
        fn(b * grain, std::min<int64_t>(n, (b + chunk) * grain));
      }
    });
  }

 private:
  using JobFn = void (*)(void* ctx, int thread_idx, int num_threads);
  template <typename F>
  static void invoke(void* ctx, int idx, int nth) {
    (*static_cast<F*>(ctx))(idx, nth);
  }

  void run_job(JobFn fn, void* ctx);
  void worker_loop(int thread_idx);

  int num_threads_;
  std::vector<std::thread> workers_;
  JobFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::atomic<uint32_t> epoch_{0};  // bumped once per job; workers wait for a change
  std::atomic<int> pending_{0};     // workers still running the current job
  std::atomic<bool> stop_{false};
  bool running_ = false;  // owner-thread only: guards against re-entrancy
};

}  // namespace keel
