// Rng: xoshiro256** seeded by splitmix64. Written from the published algorithm descriptions
// (constants and rotations as in the papers), no code copied.
#include "sampling/rng.h"

#include <chrono>
#include <exception>
#include <random>

namespace keel::sampling {
namespace {

constexpr uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

uint64_t splitmix64_next(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  uint64_t z = *state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t random_seed() {
  try {
    std::random_device device;
    // random_device yields 32-bit values; combine two.
    const uint64_t hi = device();
    const uint64_t lo = device();
    return (hi << 32) ^ lo;
  } catch (const std::exception&) {
    // No entropy source (std::random_device throws): fall back to the clock and an address.
    int local = 0;
    uint64_t state = static_cast<uint64_t>(
                         std::chrono::high_resolution_clock::now().time_since_epoch().count()) ^
                     reinterpret_cast<uintptr_t>(&local);
    return splitmix64_next(&state);
  }
}

Rng::Rng(uint64_t seed) : seed_(seed) {
  uint64_t sm = seed;
  for (uint64_t& word : s_) word = splitmix64_next(&sm);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::next_double() {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;  // 2^-53
  return static_cast<double>(next_u64() >> 11) * kTwoPowMinus53;
}

}  // namespace keel::sampling
