// CounterRng: the stream matches an independent transcription of SplitMix64 addressed by index,
// draw i depends on (seed, i) only (not on which draws were taken before, nor in which order),
// uniform() is the top 53 bits, doubles are uniform, and nearby seeds give unrelated streams.
#include "sampling/counter_rng.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "sampling/rng.h"

namespace keel::sampling {
namespace {

// Reference outputs computed independently (a Python transcription of the definition in
// counter_rng.h: key = mix64(seed + γ), draw i = mix64(key + (i + 1)·γ)); they pin the stream
// across compilers and platforms.
TEST(CounterRngTest, MatchesReferenceStream) {
  const CounterRng zero(0);
  EXPECT_EQ(zero.u64(0), 0xa706dd2f4d197e6fULL);
  EXPECT_EQ(zero.u64(1), 0xb382a305f4414f5eULL);
  EXPECT_EQ(zero.u64(2), 0x631a9154fbabf717ULL);
  const CounterRng r42(42);
  EXPECT_EQ(r42.u64(0), 0x57e1faba65107204ULL);
  EXPECT_EQ(r42.u64(1), 0xf4abd143feb24055ULL);
  EXPECT_EQ(r42.u64(1000000), 0x8505da9e8a915c81ULL);
  EXPECT_EQ(CounterRng(~uint64_t{0}).u64(~uint64_t{0}), 0x445018e305810b78ULL);  // wraps
  EXPECT_EQ(CounterRng(20240601).u64(7), 0xc24ad7c6e4d16dc5ULL);
  EXPECT_EQ(r42.seed(), 42u);
}

// It is SplitMix64: draw i is the i-th output of a generator started at the scrambled seed.
TEST(CounterRngTest, IsSplitMix64AddressedByIndex) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{7}, ~uint64_t{0} - 5}) {
    uint64_t state = seed;
    uint64_t key = splitmix64_next(&state);
    const CounterRng rng(seed);
    for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(rng.u64(i), splitmix64_next(&key)) << i;
  }
}

TEST(CounterRngTest, DrawDependsOnlyOnSeedAndIndex) {
  const CounterRng a(2026);
  std::vector<uint64_t> forward;
  for (uint64_t i = 0; i < 64; ++i) forward.push_back(a.u64(i));
  // Backwards, skipping, from a fresh object, repeated: always the same value for the same index.
  const CounterRng b(2026);
  for (uint64_t i = 64; i-- > 0;) EXPECT_EQ(b.u64(i), forward[i]) << i;
  for (uint64_t i = 0; i < 64; i += 7) EXPECT_EQ(CounterRng(2026).u64(i), forward[i]) << i;
  EXPECT_EQ(a.u64(5), a.u64(5));
  EXPECT_EQ(std::set<uint64_t>(forward.begin(), forward.end()).size(), forward.size());
}

TEST(CounterRngTest, UniformIsTop53BitsScaled) {
  const CounterRng rng(42);
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{1000000}}) {
    const double u = rng.uniform(i);
    EXPECT_EQ(u, static_cast<double>(rng.u64(i) >> 11) / 9007199254740992.0);
  }
  EXPECT_NEAR(rng.uniform(0), 0.34329192209867343, 1e-16);
  EXPECT_NEAR(CounterRng(0).uniform(0), 0.6524484863740322, 1e-16);
}

TEST(CounterRngTest, UniformsAreInUnitIntervalWithUniformMoments) {
  const CounterRng rng(7);
  constexpr int kN = 200000;
  double sum = 0.0;
  double sum_sq = 0.0;
  double lag_product = 0.0;  // E[u_i u_{i+1}] = 1/4 for independent draws
  std::vector<int> buckets(10, 0);
  double previous = rng.uniform(0);
  for (int i = 0; i < kN; ++i) {
    const double u = rng.uniform(static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    if (i > 0) lag_product += previous * u;
    previous = u;
    ++buckets[static_cast<size_t>(u * 10)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / kN, 1.0 / 3.0, 0.005);
  EXPECT_NEAR(lag_product / (kN - 1), 0.25, 0.005);
  for (int count : buckets) EXPECT_NEAR(count, kN / 10, kN / 100);
}

TEST(CounterRngTest, NearbySeedsGiveUnrelatedStreams) {
  // Seeds 0..99, draws 0..99: no value repeats (a shifted stream would repeat many).
  std::set<uint64_t> values;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    const CounterRng rng(seed);
    for (uint64_t i = 0; i < 100; ++i) values.insert(rng.u64(i));
  }
  EXPECT_EQ(values.size(), 100u * 100u);
}

}  // namespace
}  // namespace keel::sampling
