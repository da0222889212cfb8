// Engine cache events → vLLM events: chained stores merge into one BlockStored with the first
// block's parent (none for a sequence's first block), removals merge, clears stay in order; the
// hashes are the keys' low 64 bits. Tier events carry their medium ("dram", "disk"), index at that
// tier, and a pool hit outranks a longer dram-only one by the router's weighting.
#include "cluster/kv_events/kv_event_convert.h"

#include <gtest/gtest.h>

#include "cluster/job/prefix_index.h"
#include "cluster/job/router.h"

namespace keel::cluster {
namespace {

using kv::BlockHash;
using kv::CacheEvent;
using kv::CacheEventKind;

CacheEvent stored(uint64_t h, uint64_t parent, std::vector<int32_t> tokens) {
  return {CacheEventKind::kStored, BlockHash{h, h + 100},
          BlockHash{parent, parent ? parent + 100 : 0}, std::move(tokens)};
}
CacheEvent removed(uint64_t h) { return {CacheEventKind::kRemoved, BlockHash{h, 1}, {}, {}}; }

TEST(KvEventConvertTest, MergesChainsAndRuns) {
  const std::vector<CacheEvent> events = {
      stored(11, 0, {1, 2}),
      stored(12, 11, {3, 4}),  // one chain from the root
      stored(21, 5, {7, 8}),   // another chain
      removed(11),
      removed(12),
      {CacheEventKind::kCleared, {}, {}, {}},
      removed(21),
  };
  const KvEventBatch b = to_kv_event_batch(events, 2, 12.5, 1);
  EXPECT_EQ(b.ts, 12.5);
  EXPECT_EQ(b.data_parallel_rank, 1);
  ASSERT_EQ(b.events.size(), 5u);
  EXPECT_EQ(std::get<BlockStored>(b.events[0]),
            (BlockStored{{11, 12}, std::nullopt, {1, 2, 3, 4}, 2, std::nullopt, "pool"}));
  EXPECT_EQ(std::get<BlockStored>(b.events[1]),
            (BlockStored{{21}, 5, {7, 8}, 2, std::nullopt, "pool"}));
  EXPECT_EQ(std::get<BlockRemoved>(b.events[2]), (BlockRemoved{{11, 12}, "pool"}));
  EXPECT_TRUE(std::holds_alternative<AllBlocksCleared>(b.events[3]));
  EXPECT_EQ(std::get<BlockRemoved>(b.events[4]), (BlockRemoved{{21}, "pool"}));
  EXPECT_TRUE(to_kv_event_batch({}, 2, 0).events.empty());
}

CacheEvent tier_event(CacheEventKind kind, uint64_t h, kv::CacheMedium medium) {
  return {kind, BlockHash{h, h + 100}, kv::kRootHash, {}, medium};
}

TEST(KvEventConvertTest, TierEventsCarryTheirMedium) {
  using M = kv::CacheMedium;
  const std::vector<CacheEvent> events = {
      stored(11, 0, {1, 2}),
      tier_event(CacheEventKind::kStored, 11, M::kHost),
      tier_event(CacheEventKind::kStored, 12, M::kHost),
      tier_event(CacheEventKind::kStored, 11, M::kDisk),
      tier_event(CacheEventKind::kRemoved, 11, M::kHost),
      tier_event(CacheEventKind::kRemoved, 12, M::kHost),
      tier_event(CacheEventKind::kRemoved, 11, M::kDisk),
      removed(11),
  };
  const KvEventBatch b = to_kv_event_batch(events, 2, 1.0);
  ASSERT_EQ(b.events.size(), 7u);
  EXPECT_EQ(std::get<BlockStored>(b.events[0]).medium, "pool");
  // One event per tier block, no parent, no tokens.
  EXPECT_EQ(std::get<BlockStored>(b.events[1]),
            (BlockStored{{11}, std::nullopt, {}, 2, std::nullopt, "dram"}));
  EXPECT_EQ(std::get<BlockStored>(b.events[2]),
            (BlockStored{{12}, std::nullopt, {}, 2, std::nullopt, "dram"}));
  EXPECT_EQ(std::get<BlockStored>(b.events[3]),
            (BlockStored{{11}, std::nullopt, {}, 2, std::nullopt, "disk"}));
  // Removals merge per medium.
  EXPECT_EQ(std::get<BlockRemoved>(b.events[4]), (BlockRemoved{{11, 12}, "dram"}));
  EXPECT_EQ(std::get<BlockRemoved>(b.events[5]), (BlockRemoved{{11}, "disk"}));
  EXPECT_EQ(std::get<BlockRemoved>(b.events[6]), (BlockRemoved{{11}, "pool"}));
}

// The engine's tier events through the converter into the JE's index and router: dram blocks
// index at the dram tier, and a 2-block pool hit (score 2) beats a 3-block dram-only hit
// (3 × lower_tier_weight 0.5 = 1.5).
TEST(KvEventConvertTest, DramEventsIndexAndPoolHitsOutrankLongerDramHits) {
  using M = kv::CacheMedium;
  PrefixIndex index;
  ASSERT_TRUE(index
                  .apply("te-0", to_kv_event_batch(
                                     std::vector<CacheEvent>{
                                         tier_event(CacheEventKind::kStored, 11, M::kHost),
                                         tier_event(CacheEventKind::kStored, 12, M::kHost),
                                         tier_event(CacheEventKind::kStored, 13, M::kHost)},
                                     2, 1.0))
                  .ok());
  ASSERT_TRUE(index
                  .apply("te-1", to_kv_event_batch(std::vector<CacheEvent>{stored(11, 0, {1, 2}),
                                                                           stored(12, 11, {3, 4})},
                                                   2, 1.0))
                  .ok());
  const std::vector<uint64_t> prompt = {11, 12, 13};
  EXPECT_EQ(index.match(prompt, "te-0"), (PrefixMatch{3, 0, 3}));
  EXPECT_EQ(index.match(prompt, "te-1"), (PrefixMatch{2, 2, 0}));
  FleetSnapshot fleet;
  for (const char* id : {"te-0", "te-1"}) {
    TeInfo t;
    t.id = id;
    t.model = "m";
    fleet.tes.push_back(t);
  }
  const RouterConfig config;  // lower_tier_weight 0.5
  ASSERT_EQ(config.lower_tier_weight, 0.5);
  const RouteDecision d = route(RouteInput{.fleet = fleet,
                                           .index = index,
                                           .model = "m",
                                           .prompt_tokens = 6,
                                           .prompt_block_hashes = prompt,
                                           .config = config});
  EXPECT_EQ(d.branch, RouteBranch::kLocality);
  EXPECT_EQ(d.te_id, "te-1");
  // The dram copy dropped: te-0 no longer holds anything.
  ASSERT_TRUE(index
                  .apply("te-0", to_kv_event_batch(std::vector<CacheEvent>{tier_event(
                                                       CacheEventKind::kRemoved, 11, M::kHost)},
                                                   2, 1.0))
                  .ok());
  EXPECT_EQ(index.match(prompt, "te-0").num_blocks, 0);
}

}  // namespace
}  // namespace keel::cluster
