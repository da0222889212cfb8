// The fetch-vs-recompute cut: fetch while reading is cheaper than recomputing, stop at a slow
// tier, fetch everything before the prefill cost is known, ties go to fetching.
#include "kv/tier_cost.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::kv {
namespace {

constexpr size_t kBytes = 1 << 20;
constexpr int32_t kTokens = 16;
const TierCost kFastHost{0.0, 1e-10};  // 0.1 ms per MiB block
const TierCost kSlowDisk{0.05, 1e-8};  // 50 ms latency + 10 ms per MiB block

TEST(TierCostTest, FetchesWhenReadingIsCheaperThanRecomputing) {
  const std::vector<TierKind> run(5, TierKind::kHost);
  // Recomputing a block: 16 tokens × 1 ms = 16 ms ≫ 0.1 ms.
  EXPECT_EQ(blocks_to_fetch(run, kFastHost, kSlowDisk, kBytes, kTokens, 1e-3), 5);
  // 16 × 1 µs = 16 µs < 0.1 ms: recompute all.
  EXPECT_EQ(blocks_to_fetch(run, kFastHost, kSlowDisk, kBytes, kTokens, 1e-9 * 1000), 0);
}

TEST(TierCostTest, SlowTierFlipsTheDecisionToRecompute) {
  const std::vector<TierKind> disk(3, TierKind::kDisk);
  EXPECT_EQ(blocks_to_fetch(disk, kFastHost, kSlowDisk, kBytes, kTokens, 1e-3), 0);  // 60 ms > 16
  EXPECT_EQ(blocks_to_fetch(disk, kFastHost, kSlowDisk, kBytes, kTokens, 1e-2), 3);  // < 160 ms
  // Host blocks first, then disk: fetch the host part, recompute the disk part.
  const std::vector<TierKind> mixed = {TierKind::kHost, TierKind::kHost, TierKind::kDisk};
  EXPECT_EQ(blocks_to_fetch(mixed, kFastHost, kSlowDisk, kBytes, kTokens, 1e-3), 2);
}

TEST(TierCostTest, UnmeasuredPrefillFetchesAllAndTiesFetch) {
  const std::vector<TierKind> disk(4, TierKind::kDisk);
  EXPECT_EQ(blocks_to_fetch(disk, kFastHost, kSlowDisk, kBytes, kTokens, 0.0), 4);
  // Powers of two, so the sums are exact: reading a block (2^-30 s/B × 2^20 B) costs exactly
  // as much as recomputing it (16 tokens × 2^-14 s).
  const TierCost exact{0.0, 0x1p-30};
  EXPECT_EQ(blocks_to_fetch(disk, kFastHost, exact, kBytes, kTokens, 0x1p-14), 4);
  EXPECT_EQ(blocks_to_fetch({}, kFastHost, kSlowDisk, kBytes, kTokens, 1e-3), 0);
}

// Tier T3: one request's latency, then bytes over the link, against recomputing the run.
TEST(PeerTierCostTest, FetchesAllOrNoneByMeasuredLinkCost) {
  const TierCost fast_link{1e-3, 1e-10};  // 1 ms a request + 0.1 ms per MiB block
  const TierCost throttled{1e-3, 1e-6};   // 1 s per MiB block (a 1 MB/s link)
  // Recomputing a block: 16 tokens × 1 ms = 16 ms.
  EXPECT_EQ(peer_blocks_to_fetch(6, fast_link, kBytes, kTokens, 1e-3), 6);
  EXPECT_EQ(peer_blocks_to_fetch(6, throttled, kBytes, kTokens, 1e-3), 0);
  // The request latency is paid once: worth it for a long run, not for one block.
  const TierCost far{0.05, 1e-10};                                    // 50 ms a request
  EXPECT_EQ(peer_blocks_to_fetch(1, far, kBytes, kTokens, 1e-3), 0);  // 50.1 ms > 16 ms
  EXPECT_EQ(peer_blocks_to_fetch(8, far, kBytes, kTokens, 1e-3), 8);  // 50.8 ms < 128 ms
  EXPECT_EQ(peer_blocks_to_fetch(0, fast_link, kBytes, kTokens, 1e-3), 0);
}

TEST(PeerTierCostTest, UnmeasuredPrefillFetchesAllAndTiesFetch) {
  const TierCost throttled{1e-3, 1e-6};
  EXPECT_EQ(peer_blocks_to_fetch(3, throttled, kBytes, kTokens, 0.0), 3);
  // Exact powers of two: 2 blocks × 2^-10 s each + 2^-10 s latency = 3 · 2^-10 s of fetching,
  // against 2 blocks' recompute of 3 · 2^-11 s each.
  const TierCost exact{0x1p-10, 0x1p-30};
  EXPECT_EQ(peer_blocks_to_fetch(2, exact, kBytes, kTokens, 3 * 0x1p-15), 2);
  EXPECT_EQ(peer_blocks_to_fetch(2, exact, kBytes, kTokens, 3 * 0x1p-15 * 0.99), 0);
}

}  // namespace
}  // namespace keel::kv
