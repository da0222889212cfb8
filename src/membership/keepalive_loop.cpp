// KeepaliveLoop; see keepalive_loop.h.
#include "membership/keepalive_loop.h"

#include "core/clock.h"
#include "core/log.h"

namespace keel::membership {

namespace {
int64_t steady_ns() { return SteadyClock().now_ns(); }
}  // namespace

KeepaliveLoop::KeepaliveLoop(std::chrono::milliseconds interval, std::function<Status()> refresh,
                             std::chrono::milliseconds expire_after)
    : interval_(interval),
      refresh_(std::move(refresh)),
      expire_after_(expire_after),
      deadline_ns_(expire_after.count() > 0
                       ? steady_ns() + std::chrono::nanoseconds(expire_after).count()
                       : 0),
      thread_([this] { run(); }) {}

bool KeepaliveLoop::alive() const {
  if (!alive_.load()) return false;
  const int64_t deadline = deadline_ns_.load();
  if (deadline == 0 || steady_ns() < deadline) return true;
  alive_ = false;  // latched: once seen lost, a later confirmation does not revive it
  return false;
}

KeepaliveLoop::~KeepaliveLoop() { stop(); }

void KeepaliveLoop::stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void KeepaliveLoop::run() {
  bool failing = false;
  while (true) {
    {
      UniqueLock lock(mu_);
      const bool stopped = cv_.wait_for(lock.native(), interval_, [this] {
        mu_.assert_held();  // a wait's predicate runs under its lock
        return stopping_;
      });
      if (stopped) return;
    }
    const int64_t sent_ns = steady_ns();
    const Status s = refresh_();
    if (!alive()) {  // past the deadline (fencing): lost, whatever a late refresh says
      KEEL_LOG_WARN("membership: lease taken as lost: no keepalive confirmed for {} ms",
                    expire_after_.count());
      return;
    }
    if (s.ok() && expire_after_.count() > 0) {
      deadline_ns_ = sent_ns + std::chrono::nanoseconds(expire_after_).count();
    }
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
