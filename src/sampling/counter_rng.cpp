// CounterRng: SplitMix64 addressed by index (see counter_rng.h). Written from the published
// algorithm description, no code copied.
#include "sampling/counter_rng.h"

#include "sampling/rng.h"

namespace keel::sampling {
namespace {

constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;  // SplitMix64's increment (odd: a bijection)

}  // namespace

CounterRng::CounterRng(uint64_t seed) : seed_(seed) {
  uint64_t state = seed;
  key_ = splitmix64_next(&state);
}

uint64_t CounterRng::u64(uint64_t index) const {
  uint64_t state = key_ + index * kGamma;  // wraps modulo 2^64, as SplitMix64's state does
  return splitmix64_next(&state);
}

double CounterRng::uniform(uint64_t index) const {
  constexpr double kTwoPowMinus53 = 1.0 / 9007199254740992.0;  // 2^-53
  return static_cast<double>(u64(index) >> 11) * kTwoPowMinus53;
}

}  // namespace keel::sampling
