// Rng: a sequential seeded pseudo-random generator — xoshiro256** (Blackman & Vigna) seeded
// through splitmix64, with keel's own integer → double conversion — for reproducible data (tests,
// synthetic inputs). The sampler does not use it: its draws are counter-based (counter_rng.h), so
// that a resumed request draws as the uninterrupted one. The stream depends only on the 64-bit
// seed: the same seed gives the same numbers on every thread, process, compiler and C library (no
// std:: distributions, whose outputs are implementation-defined).
//
// Invariant: the 256-bit state is never all zero (splitmix64 cannot produce four zero words).
// Thread safety: a value type without shared state; one Rng per request, used by one thread.
#pragma once

#include <array>
#include <cstdint>

namespace keel::sampling {

// One step of splitmix64: advances *state and returns the next output. Used for seeding and as a
// cheap stateless mixer.
uint64_t splitmix64_next(uint64_t* state);

// A seed from the operating system's entropy source (std::random_device), for requests that do
// not ask for reproducibility.
uint64_t random_seed();

class Rng {
 public:
  explicit Rng(uint64_t seed);

  // The next 64 uniformly distributed bits.
  uint64_t next_u64();
  // A uniform double in [0, 1): the top 53 bits of next_u64() times 2^-53, so every value is a
  // multiple of 2^-53 and 1.0 is never returned.
  double next_double();

  [[nodiscard]] uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  std::array<uint64_t, 4> s_;
};

}  // namespace keel::sampling
