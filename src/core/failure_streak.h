// FailureStreak: when a failure that repeats (a full disk, an exhausted descriptor table) deserves
// a log line. The first failure of a streak is logged, later ones at most once per interval; a
// success ends the streak and reports how many failures it held, so a caller can log the
// recovery once. Times are passed in (steady-clock nanoseconds), so tests need no clock.
//
// Thread safety: none; the owner serializes calls (e.g. under its own mutex).
#pragma once

#include <chrono>
#include <cstdint>

namespace keel {

class FailureStreak {
 public:
  explicit FailureStreak(std::chrono::nanoseconds log_interval)
      : interval_ns_(log_interval.count()) {}

  // Records a failure at `now_ns`; true when this one should be logged: the first of a streak,
  // or the first after log_interval since the last logged one.
  bool fail(int64_t now_ns) {
    ++streak_;
    if (streak_ == 1 || now_ns - last_logged_ns_ >= interval_ns_) {
      last_logged_ns_ = now_ns;
      return true;
    }
    return false;
  }
  // Records a success; returns the length of the streak it ends (0 when there was none).
  int64_t succeed() {
    const int64_t n = streak_;
    streak_ = 0;
    return n;
  }
  // Failures since the last success.
  [[nodiscard]] int64_t streak() const { return streak_; }

 private:
  int64_t interval_ns_;
  int64_t streak_ = 0;
  int64_t last_logged_ns_ = 0;
};

}  // namespace keel
