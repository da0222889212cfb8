// The engine's request timestamps: nanoseconds on the steady clock (arrival, first token, finish),
// shared by the engine's .cpp files. Internal to the engine module.
#pragma once

#include <chrono>
#include <cstdint>

namespace keel::engine {

inline int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

inline double seconds_between(int64_t from_ns, int64_t to_ns) {
  return static_cast<double>(to_ns - from_ns) * 1e-9;
}

}  // namespace keel::engine
