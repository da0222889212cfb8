// Seeded streams of standard normal values for the weight generators (`keel make-model`'s random
// bodies, the embedding fixture's random rows): splitmix64 turns (seed, stream id) into well-mixed
// states, FNV-1a turns tensor names into stream ids, and NormalStream draws N(0, 1) values by
// Box–Muller. Everything is deterministic: the same (seed, name, row) gives the same values on
// every machine and at every thread count.
//
// Thread safety: a NormalStream is one owner's; the free functions are pure.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string_view>

namespace keel::model {

// splitmix64: advances `x` and returns a well-mixed 64-bit value.
inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// FNV-1a of a tensor name: the stream id of its rows.
inline uint64_t hash_name(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A deterministic stream of standard normals (Box–Muller over splitmix64 uniforms).
class NormalStream {
 public:
  explicit NormalStream(uint64_t seed) : state_(seed) {}
  // The stream of row `row` of the tensor named `name` under `seed`.
  static NormalStream for_row(uint64_t seed, std::string_view name, int64_t row) {
    uint64_t s = (seed ^ hash_name(name)) + static_cast<uint64_t>(row);
    return NormalStream(splitmix64(s));
  }

  float next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(splitmix64(state_) >> 11) + 1.0) * 0x1p-53;
    const double u2 = static_cast<double>(splitmix64(state_) >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2.0 * std::numbers::pi * u2));
    has_spare_ = true;
    return static_cast<float>(r * std::cos(2.0 * std::numbers::pi * u2));
  }

 private:
  uint64_t state_;
  float spare_ = 0.0f;
  bool has_spare_ = false;
};

}  // namespace keel::model
