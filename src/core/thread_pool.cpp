// ThreadPool: epoch-based job hand-off with a spin-then-futex wait on both sides.
#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace keel {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a waiting thread spins before it sleeps: long enough to catch the next op of a
// forward pass without a futex round trip, short enough that a thread waiting on a preempted
// peer gives its core back within a fraction of a scheduler slice.
constexpr auto kSpinTime = std::chrono::microseconds(50);
constexpr int kSpinsPerClockRead = 64;

// Spins until done() or kSpinTime has passed; returns done().
template <typename Done>
bool spin_until(Done&& done) {
  const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
  for (;;) {
    for (int i = 0; i < kSpinsPerClockRead; ++i) {
      if (done()) return true;
      cpu_relax();
    }
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0)
    num_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  num_threads_ = num_threads;
  workers_.reserve(static_cast<size_t>(num_threads_ - 1));
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  epoch_.fetch_add(1, std::memory_order_acq_rel);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_job(JobFn fn, void* ctx) {
  KEEL_CHECK_MSG(!running_, "ThreadPool::run is not re-entrant");
  if (num_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  running_ = true;
  job_fn_ = fn;
  job_ctx_ = ctx;
  pending_.store(num_threads_ - 1, std::memory_order_relaxed);
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();

  fn(ctx, 0, num_threads_);

  if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
    for (int p; (p = pending_.load(std::memory_order_acquire)) != 0;) {
      pending_.wait(p, std::memory_order_acquire);
    }
  }
  running_ = false;
}

void ThreadPool::worker_loop(int thread_idx) {
  uint32_t seen = 0;  // the epoch's initial value: a job posted before this thread ran still counts
  for (;;) {
    if (!spin_until([&] { return epoch_.load(std::memory_order_acquire) != seen; })) {
      while (epoch_.load(std::memory_order_acquire) == seen) {
        epoch_.wait(seen, std::memory_order_acquire);
      }
    }
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    job_fn_(job_ctx_, thread_idx, num_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace keel
