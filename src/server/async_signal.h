// AsyncSignal: a level-triggered wake-up for one coroutine on a strand. notify() (from the same
// strand) wakes the pending wait, or the next one if none is pending; waits may also end at a
// deadline. Used by a generation request to sleep until engine events arrive, the peer-watch
// read ends, or its timeout passes.
//
// Thread safety: strand-confined — construct, notify and wait on one strand only.
#pragma once

#include <chrono>

#include "server/net.h"

namespace keel::server {

class AsyncSignal {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AsyncSignal(net::any_io_executor strand) : timer_(std::move(strand)) {}
  AsyncSignal(const AsyncSignal&) = delete;
  AsyncSignal& operator=(const AsyncSignal&) = delete;

  void notify() {
    notified_ = true;
    timer_.cancel();
  }

  // Returns true when notified, false when `deadline` passed first.
  net::awaitable<bool> wait_until(Clock::time_point deadline) {
    if (!notified_) {
      timer_.expires_at(deadline);
      error_code ec;
      co_await timer_.async_wait(net::redirect_error(net::use_awaitable, ec));
    }
    const bool woke = notified_;
    notified_ = false;
    co_return woke;
  }
  net::awaitable<bool> wait() { return wait_until(Clock::time_point::max()); }

 private:
  net::steady_timer timer_;
  bool notified_ = false;
};

}  // namespace keel::server
