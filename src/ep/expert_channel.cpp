// The channels' shared waiting: a short spin, then futex sleeps in slices.
#include "ep/expert_channel.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace keel::ep {
namespace {

constexpr auto kSpin = std::chrono::microseconds(200);
constexpr auto kSlice = std::chrono::milliseconds(50);

void futex_wait(std::atomic<uint32_t>* a, uint32_t expected, std::chrono::nanoseconds for_) {
  timespec ts{static_cast<time_t>(for_.count() / 1'000'000'000),
              static_cast<long>(for_.count() % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(a), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

}  // namespace

static_assert(std::atomic<uint32_t>::is_always_lock_free);

void wake_post_waiters(std::atomic<uint32_t>& seq) {
  // Not FUTEX_PRIVATE: a shared-memory channel's waiter is another process.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

Result<uint32_t> wait_for_post(std::atomic<uint32_t>& seq, uint32_t seen,
                               std::chrono::milliseconds timeout,
                               const std::function<bool()>& alive) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  // Spin first: the other side usually answers within a layer's compute.
  for (int i = 0;; ++i) {
    const uint32_t v = seq.load(std::memory_order_acquire);
    if (v != seen) return v;
    if ((i & 63) == 63 && Clock::now() - start > kSpin) break;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
  auto next_check = Clock::now() + kSlice;
  for (;;) {
    const uint32_t v = seq.load(std::memory_order_acquire);
    if (v != seen) return v;
    const auto now = Clock::now();
    if (now - start >= timeout) {
      return Status::unavailable("expert channel: no answer in " + std::to_string(timeout.count()) +
                                 " ms");
    }
    if (now >= next_check) {
      if (alive && !alive()) return Status::unavailable("expert channel: the peer is gone");
      next_check = now + kSlice;
    }
    futex_wait(&seq, seen, std::min<Clock::duration>(kSlice, timeout - (now - start)));
  }
}

}  // namespace keel::ep
