// KvHandoffStreams without an engine: a stream catches exactly its watched keys, once each, with
// the right parents; close() names the keys never caught; two streams sharing a key both get it;
// a closed stream wants nothing; on_caught fires per catch and stops once replaced.
#include "cluster/kv/kv_handoff_streams.h"

#include <gtest/gtest.h>

#include <vector>

namespace keel::cluster {
namespace {

kv::BlockHash key(int i) { return {static_cast<uint64_t>(i) + 1, 0x77}; }

std::vector<std::byte> bytes(int i) { return std::vector<std::byte>(8, std::byte(i)); }

TEST(KvHandoffStreamsTest, CatchesWatchedBlocksOnceInOrderWithParents) {
  KvHandoffStreams s;
  int caught = 0;
  s.set_on_caught([&] { ++caught; });
  s.open(1, {key(0), key(1), key(2), key(3)});
  EXPECT_TRUE(s.wants(key(0)));
  EXPECT_FALSE(s.wants(key(9)));
  s.catch_block(key(9), bytes(9));  // not watched: ignored
  s.catch_block(key(1), bytes(1));
  s.catch_block(key(0), bytes(0));
  s.catch_block(key(1), bytes(5));  // again: already caught
  EXPECT_EQ(caught, 2);
  EXPECT_FALSE(s.wants(key(1)));
  EXPECT_EQ(s.num_pending(), 2u);
  const std::vector<CaughtBlock> got = s.take(1);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].index, 1);
  EXPECT_EQ(got[0].hash, key(1));
  EXPECT_EQ(got[0].parent, key(0));
  EXPECT_EQ(got[0].payload, bytes(1));
  EXPECT_EQ(got[1].index, 0);
  EXPECT_EQ(got[1].parent, kv::kRootHash);
  EXPECT_TRUE(s.take(1).empty());  // taken once
  s.catch_block(key(3), bytes(3));
  EXPECT_EQ(s.close(1), (std::vector<int32_t>{2}));  // never caught: key 2
  EXPECT_FALSE(s.wants(key(2)));
  EXPECT_EQ(s.num_open(), 0u);
  EXPECT_EQ(s.num_pending(), 0u);  // key 3's copy went with the stream
  EXPECT_TRUE(s.close(1).empty());
}

TEST(KvHandoffStreamsTest, SharedKeysReachEveryStreamAndClosingOneKeepsTheOther) {
  KvHandoffStreams s;
  s.open(1, {key(0), key(1)});
  s.open(2, {key(0), key(2)});
  s.catch_block(key(0), bytes(0));
  EXPECT_EQ(s.take(1).size(), 1u);
  EXPECT_EQ(s.take(2).size(), 1u);
  EXPECT_EQ(s.close(1), (std::vector<int32_t>{1}));
  EXPECT_FALSE(s.wants(key(1)));
  EXPECT_TRUE(s.wants(key(2)));
  // Reopening an id replaces the stream and its watch list.
  s.open(2, {key(5)});
  EXPECT_FALSE(s.wants(key(2)));
  EXPECT_TRUE(s.wants(key(5)));
  EXPECT_EQ(s.close(2), (std::vector<int32_t>{0}));
}

TEST(KvHandoffStreamsTest, ReplacedCallbackRunsNoMore) {
  KvHandoffStreams s;
  int first = 0;
  s.set_on_caught([&] { ++first; });
  s.open(1, {key(0), key(1)});
  s.catch_block(key(0), bytes(0));
  s.set_on_caught({});
  s.catch_block(key(1), bytes(1));
  EXPECT_EQ(first, 1);
  EXPECT_EQ(s.take(1).size(), 2u);
}

}  // namespace
}  // namespace keel::cluster
