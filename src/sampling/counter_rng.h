// CounterRng: the sampler's random stream in counter mode — draw i of a request is a pure function
// of (seed, i), so a request re-driven from its i-th generated token (GenerationRequest::
// resumed_tokens) on another engine draws exactly what the uninterrupted run drew there, however
// many draws happened before.
//
// Construction: SplitMix64 (Steele, Lea & Flood, OOPSLA 2014) addressed by index. The seed is
// scrambled once, key = mix64(seed + γ) (so nearby seeds give unrelated keys); draw i is
// mix64(key + (i + 1)·γ), with γ = 0x9e3779b97f4a7c15 and mix64 the Stafford "variant 13"
// finalizer — i.e. exactly the i-th output of a SplitMix64 generator whose state starts at key,
// a stream that passes BigCrush. Integer arithmetic only: the same (seed, i) gives the same bits on
// every thread, process, compiler and C library. Two seeds' streams share a draw only when their
// keys differ by m·γ with |m| < the stream length (probability ~2^-43 for 2^20 draws).
//
// Thread safety: a value type without mutable state.
#pragma once

#include <cstdint>

namespace keel::sampling {

class CounterRng {
 public:
  explicit CounterRng(uint64_t seed);

  // The 64 uniformly distributed bits of draw `index`.
  [[nodiscard]] uint64_t u64(uint64_t index) const;
  // A uniform double in [0, 1) for draw `index`: the top 53 bits of u64(index) times 2^-53, so
  // every value is a multiple of 2^-53 and 1.0 is never returned.
  [[nodiscard]] double uniform(uint64_t index) const;

  [[nodiscard]] uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  uint64_t key_;  // mix64(seed + γ): the SplitMix64 state before draw 0
};

}  // namespace keel::sampling
