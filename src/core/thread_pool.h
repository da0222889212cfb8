// ThreadPool: a fixed set of persistent workers that run one parallel job at a time. The caller
// of run() takes part as thread 0, so a pool of N threads starts N-1 workers. Workers spin briefly
// between jobs (keeping per-op dispatch cost in the microseconds) and then sleep on a futex.
//
// Thread safety: run() may be called from one thread at a time (the pool's owner); it is not
// re-entrant (a job must not call run() on the same pool). One pool per engine, passed in.
#pragma once

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

  // Splits [0, n) into num_threads contiguous ranges (multiples of `grain` except the last) and
  // calls fn(begin, end) for each non-empty range.
  template <typename F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    run([&](int idx, int nth) {
      const int64_t blocks = (n + grain - 1) / grain;
      const int64_t begin = blocks * idx / nth * grain;
      const int64_t end = std::min<int64_t>(n, blocks * (idx + 1) / nth * grain);
      if (begin < end) fn(begin, end);
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
