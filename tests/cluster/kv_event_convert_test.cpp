// Engine cache events → vLLM events: chained stores merge into one BlockStored with the first
// block's parent (none for a sequence's first block), removals merge, clears stay in order; the
// hashes are the keys' low 64 bits.
#include "cluster/kv_event_convert.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace keel::cluster
