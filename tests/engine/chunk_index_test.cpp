// ChunkIndex (engine/chunk_index.h): lookups by chunk hash, the block bound with least recently
// used eviction (a lookup counts as a use), and the one entry that always stays.
#include "engine/chunk_index.h"

#include <gtest/gtest.h>

namespace keel::engine {
namespace {

kv::BlockHash hash_of(uint64_t i) { return kv::BlockHash{i, i * 7 + 1}; }

TEST(ChunkIndexTest, FindsIndexedChunksAndEvictsTheLeastRecentlyUsedPastTheBound) {
  ChunkIndex index(10);
  EXPECT_EQ(index.find(hash_of(1)), std::nullopt);
  EXPECT_TRUE(index.insert(hash_of(1), 11, 4).empty());
  EXPECT_TRUE(index.insert(hash_of(2), 12, 4).empty());
  EXPECT_TRUE(index.contains(hash_of(1)));
  EXPECT_EQ(index.find(hash_of(1)), 11);  // chunk 1 is now the most recently used
  // 4 + 4 + 4 > 10: chunk 2, the least recently used, goes.
  EXPECT_EQ(index.insert(hash_of(3), 13, 4), std::vector<RequestKey>{12});
  EXPECT_EQ(index.size(), 2u);
  EXPECT_EQ(index.blocks(), 8);
  EXPECT_FALSE(index.contains(hash_of(2)));
  EXPECT_EQ(index.find(hash_of(3)), 13);
}

TEST(ChunkIndexTest, AChunkLargerThanTheBoundStaysAlone) {
  ChunkIndex index(4);
  EXPECT_TRUE(index.insert(hash_of(1), 11, 2).empty());
  EXPECT_EQ(index.insert(hash_of(2), 12, 9), std::vector<RequestKey>{11});
  EXPECT_EQ(index.size(), 1u);
  EXPECT_EQ(index.find(hash_of(2)), 12);
}

}  // namespace
}  // namespace keel::engine
