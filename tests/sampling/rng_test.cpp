#include "sampling/rng.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <vector>

namespace keel::sampling {
namespace {

// Reference outputs computed independently (a Python transcription of the published splitmix64
// and xoshiro256** definitions); they pin the stream across compilers and platforms.
TEST(RngTest, MatchesReferenceStream) {
  uint64_t sm = 0;
  EXPECT_EQ(splitmix64_next(&sm), 0xe220a8397b1dcdafULL);

  Rng zero(0);
  EXPECT_EQ(zero.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(zero.next_u64(), 0xbf6e1f784956452aULL);
  EXPECT_EQ(zero.next_u64(), 0x1a5f849d4933e6e0ULL);
  EXPECT_EQ(zero.next_u64(), 0x6aa594f1262d2d2cULL);

  Rng r42(42);
  EXPECT_EQ(r42.next_u64(), 0x15780b2e0c2ec716ULL);
  EXPECT_EQ(r42.next_u64(), 0x6104d9866d113a7eULL);
  EXPECT_EQ(r42.seed(), 42u);
}

TEST(RngTest, DoubleIsTop53BitsScaled) {
  Rng a(42);
  Rng b(42);
  const uint64_t bits = a.next_u64();
  const double d = b.next_double();
  EXPECT_EQ(d, static_cast<double>(bits >> 11) / 9007199254740992.0);
  EXPECT_NEAR(d, 0.08386297105988216, 1e-16);
}

TEST(RngTest, DoublesAreInUnitIntervalWithUniformMoments) {
  Rng rng(7);
  constexpr int kN = 200000;
  double sum = 0.0;
  double sum_sq = 0.0;
  std::vector<int> buckets(10, 0);
  for (int i = 0; i < kN; ++i) {
    const double u = rng.next_double();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    ++buckets[static_cast<size_t>(u * 10)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / kN, 1.0 / 3.0, 0.005);
  for (int count : buckets) EXPECT_NEAR(count, kN / 10, kN / 100);
}

TEST(RngTest, SameSeedSameStreamOnAnyThread) {
  std::vector<uint64_t> here(1000);
  Rng rng(123);
  for (auto& x : here) x = rng.next_u64();
  std::vector<uint64_t> there(1000);
  std::thread t([&] {
    Rng other(123);
    for (auto& x : there) x = other.next_u64();
  });
  t.join();
  EXPECT_EQ(here, there);
}

TEST(RngTest, DifferentSeedsDiffer) {
  std::set<uint64_t> firsts;
  for (uint64_t seed = 0; seed < 100; ++seed) firsts.insert(Rng(seed).next_u64());
  EXPECT_EQ(firsts.size(), 100u);
}

TEST(RngTest, RandomSeedsVary) {
  std::set<uint64_t> seeds;
  for (int i = 0; i < 8; ++i) seeds.insert(random_seed());
  EXPECT_GT(seeds.size(), 1u);
}

}  // namespace
}  // namespace keel::sampling
