// Rng: the seeded pseudo-random source of the load generator (workloads and arrival times).
// std::mt19937_64's output sequence is fixed by the C++ standard, but the std::*_distribution
// classes are not, so the draws below are written out here: the same seed gives the same prompts
// and the same arrival schedule with any standard library.
//
// Thread safety: an Rng is a value with mutable state; use one per thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>

namespace keel::loadgen {

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}

  // 64 uniformly distributed bits.
  uint64_t next_u64() { return engine_(); }

  // Uniform in [0, 1) with 53 bits of resolution.
  double uniform01() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

  // Uniform integer in [lo, hi] (inclusive); requires lo <= hi. Plain modulo: the bias is
  // span / 2^64, below 2^-32 for any range a workload uses.
  int64_t uniform_int(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    if (span == 0) return static_cast<int64_t>(next_u64());  // the full 64-bit range
    return lo + static_cast<int64_t>(next_u64() % span);
  }

  // Exponential with the given rate (mean 1/rate), by inversion.
  double exponential(double rate) { return -std::log1p(-uniform01()) / rate; }

  // Standard normal (Box-Muller; one of the pair is discarded to keep the state simple).
  double normal() {
    double u1 = uniform01();
    while (u1 <= 0.0) u1 = uniform01();
    const double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

  // Gamma(shape, scale), mean shape*scale (Marsaglia-Tsang; shape < 1 via the u^(1/shape) boost).
  double gamma(double shape, double scale) {
    if (shape < 1.0) {
      double u = uniform01();
      while (u <= 0.0) u = uniform01();
      return gamma(shape + 1.0, scale) * std::pow(u, 1.0 / shape);
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1.0 / std::sqrt(9.0 * d);
    for (;;) {
      double x = normal();
      double v = 1.0 + c * x;
      if (v <= 0.0) continue;
      v = v * v * v;
      const double u = uniform01();
      if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
      if (u > 0.0 && std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v * scale;
    }
  }

 private:
  std::mt19937_64 engine_;
};

}  // namespace keel::loadgen
