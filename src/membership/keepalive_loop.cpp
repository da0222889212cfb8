// KeepaliveLoop; see keepalive_loop.h.
#include "membership/keepalive_loop.h"

#include "core/log.h"

namespace keel::membership {

KeepaliveLoop::KeepaliveLoop(std::chrono::milliseconds interval, std::function<Status()> refresh)
    : interval_(interval), refresh_(std::move(refresh)), thread_([this] { run(); }) {}

KeepaliveLoop::~KeepaliveLoop() { stop(); }

void KeepaliveLoop::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KeepaliveLoop::run() {
  bool failing = false;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (cv_.wait_for(lock, interval_, [this] { return stopping_; })) return;
    }
    const Status s = refresh_();
    if (s.code() == StatusCode::kNotFound) {
      KEEL_LOG_WARN("membership: lease lost: {}", s.to_string());
      alive_ = false;
      return;
    }
    if (!s.ok() && !failing) KEEL_LOG_WARN("membership: keepalive failed: {}", s.to_string());
    if (s.ok() && failing) KEEL_LOG_INFO("membership: keepalive recovered");
    failing = !s.ok();
  }
}

}  // namespace keel::membership
