// WeightsHasher: the streamed whole-entry hash equals the one-shot XXH3-64 whatever the steps the
// prefix becomes available in; it waits (bounded) for bytes that never come.
#include "cluster/weights/weights_hasher.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "cluster/transfer/kv_transfer_frame.h"

namespace keel::cluster {
namespace {

using namespace std::chrono_literals;

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> out(n);
  for (std::byte& b : out) b = static_cast<std::byte>(rng());
  return out;
}

TEST(WeightsHasherTest, StreamedHashEqualsOneShot) {
  const std::vector<std::byte> bytes = random_bytes((20u << 20) + 12345, 7);  // > one 16 MiB step
  const uint64_t want = frame_payload_checksum(bytes);
  for (uint64_t step : {uint64_t{1} << 20, uint64_t{3} << 20, uint64_t{20} << 20}) {
    WeightsHasher h(bytes.data(), bytes.size());
    for (uint64_t at = step; at < bytes.size(); at += step) {
      h.advance(at);
      h.advance(at / 2);  // a smaller value is ignored
    }
    h.advance(bytes.size());
    Result<uint64_t> got = h.result(std::chrono::steady_clock::now() + 20s);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, want) << "step " << step;
  }
  // One byte changed: another hash.
  std::vector<std::byte> other = bytes;
  other[other.size() / 3] ^= std::byte{1};
  WeightsHasher h(other.data(), other.size());
  h.advance(other.size());
  EXPECT_NE(*h.result(std::chrono::steady_clock::now() + 20s), want);
}

TEST(WeightsHasherTest, MissingBytesTimeOut) {
  const std::vector<std::byte> bytes = random_bytes(4096, 3);
  WeightsHasher h(bytes.data(), bytes.size());
  h.advance(4000);
  Result<uint64_t> got = h.result(std::chrono::steady_clock::now() + 500ms);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("of 4096 bytes hashed"), std::string::npos)
      << got.status().message();
}

}  // namespace
}  // namespace keel::cluster
