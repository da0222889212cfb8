// KeepaliveLoop: a thread that calls refresh() every `interval` until stopped — a lease's
// keepalive. A failed refresh is retried at the next tick (the store may be restarting); once
// refresh() reports the lease gone (NotFound) the loop records it and ends. Owned by one session.
//
// Thread safety: alive() from any thread; stop() from the owner, idempotent.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "core/status.h"

namespace keel::membership {

class KeepaliveLoop {
 public:
  // Starts the thread; the first refresh comes after one interval.
  KeepaliveLoop(std::chrono::milliseconds interval, std::function<Status()> refresh);
  ~KeepaliveLoop();
  KeepaliveLoop(const KeepaliveLoop&) = delete;
  KeepaliveLoop& operator=(const KeepaliveLoop&) = delete;

  void stop();
  // False once refresh() returned NotFound (the lease expired or was revoked elsewhere).
  bool alive() const { return alive_.load(); }

 private:
  void run();

  const std::chrono::milliseconds interval_;
  const std::function<Status()> refresh_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  std::atomic<bool> alive_{true};
  std::thread thread_;
};

}  // namespace keel::membership
