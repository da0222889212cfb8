// KeepaliveLoop: a thread that calls refresh() every `interval` until stopped — a lease's
// keepalive. A failed refresh is retried at the next tick (the store may be restarting); once
// refresh() reports the lease gone (NotFound) the loop records it and ends. Owned by one session.
//
// Fencing (`expire_after` > 0): the lease is also taken as lost once no refresh has succeeded for
// `expire_after` since it was sent (the store counts a lease's TTL from the last keepalive it
// received, so with expire_after < TTL this side gives up first): a holder cut off from the store
// stops acting on the lease before the store can expire it and grant it to another.
//
// Thread safety: alive() from any thread; stop() from the owner, idempotent.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <thread>

#include "core/mutex.h"
#include "core/status.h"

namespace keel::membership {

class KeepaliveLoop {
 public:
  // Starts the thread; the first refresh comes after one interval. The lease was granted (or
  // last refreshed) just before: the first `expire_after` counts from now.
  KeepaliveLoop(std::chrono::milliseconds interval, std::function<Status()> refresh,
                std::chrono::milliseconds expire_after = std::chrono::milliseconds(0));
  ~KeepaliveLoop();
  KeepaliveLoop(const KeepaliveLoop&) = delete;
  KeepaliveLoop& operator=(const KeepaliveLoop&) = delete;

  void stop();
  // False once refresh() returned NotFound (the lease expired or was revoked elsewhere), or, with
  // `expire_after`, once that long has passed since the last successful refresh was sent.
  bool alive() const;

 private:
  void run();

  const std::chrono::milliseconds interval_;
  const std::function<Status()> refresh_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ KEEL_GUARDED_BY(mu_) = false;
  mutable std::atomic<bool> alive_{true};  // latched false by alive() past the deadline
  const std::chrono::milliseconds expire_after_;
  std::atomic<int64_t> deadline_ns_{0};  // steady clock; 0 = no deadline
  std::thread thread_;
};

}  // namespace keel::membership
