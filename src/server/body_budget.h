// BodyBudget: the server-wide cap on request-body bytes held in memory at once
// (ServerConfig::max_inflight_body_bytes). A connection reserves a request's Content-Length before
// reading its body (a chunked body: each piece as it arrives) and releases it once the request is
// parsed into its typed form, so many clients each trickling a large body cannot make the server
// buffer more than the cap: a request that does not fit gets 503 and the connection closes.
// BodyReservation is the RAII handle of one request's share.
//
// Invariant: used() ≤ limit() (reservations that would cross it fail and change nothing).
// Thread safety: BodyBudget is lock-free and may be used from any thread; a BodyReservation has
// one owner.
#pragma once

#include <atomic>
#include <cstddef>

namespace keel::server {

class BodyBudget {
 public:
  explicit BodyBudget(size_t limit) : limit_(limit) {}
  BodyBudget(const BodyBudget&) = delete;
  BodyBudget& operator=(const BodyBudget&) = delete;

  // Adds `bytes` to the bytes in use; false (and nothing changes) when that would exceed limit().
  [[nodiscard]] bool try_reserve(size_t bytes) {
    size_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void release(size_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  [[nodiscard]] size_t used() const { return used_.load(std::memory_order_relaxed); }
  [[nodiscard]] size_t limit() const { return limit_; }

 private:
  const size_t limit_;
  std::atomic<size_t> used_{0};
};

class BodyReservation {
 public:
  explicit BodyReservation(BodyBudget* budget) : budget_(budget) {}
  ~BodyReservation() { reset(); }
  BodyReservation(const BodyReservation&) = delete;
  BodyReservation& operator=(const BodyReservation&) = delete;

  // Grows this reservation to `total` bytes (never shrinks); false when the budget has no room.
  [[nodiscard]] bool grow_to(size_t total) {
    if (total <= bytes_) return true;
    if (!budget_->try_reserve(total - bytes_)) return false;
    bytes_ = total;
    return true;
  }
  void reset() {
    if (bytes_ > 0) budget_->release(bytes_);
    bytes_ = 0;
  }
  [[nodiscard]] size_t bytes() const { return bytes_; }

 private:
  BodyBudget* budget_;
  size_t bytes_ = 0;
};

}  // namespace keel::server
