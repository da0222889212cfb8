// Clock: monotonic time in nanoseconds behind an interface, so schedulers and timeouts can be
// tested with a manual clock. SteadyClock is the real one (stateless; construct where needed).
#pragma once

#include <chrono>
#include <cstdint>

namespace keel {

class Clock {
 public:
  virtual ~Clock() = default;
  [[nodiscard]] virtual int64_t now_ns() const = 0;
  [[nodiscard]] double now_seconds() const { return static_cast<double>(now_ns()) * 1e-9; }
};

class SteadyClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_ns() const override {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

// A clock that moves only when told to; for tests.
class ManualClock final : public Clock {
 public:
  [[nodiscard]] int64_t now_ns() const override { return now_ns_; }
  void advance_ns(int64_t ns) { now_ns_ += ns; }

 private:
  int64_t now_ns_ = 0;
};

}  // namespace keel
