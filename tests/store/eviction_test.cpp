// The store's LRU eviction rule (store/eviction.h): least recently used first, pinned entries
// kept, nothing removed without a budget, nullopt when the new entry cannot fit.
#include "store/eviction.h"

#include <gtest/gtest.h>

namespace keel::store {
namespace {

TEST(EvictionTest, RemovesLeastRecentlyUsedUntilTheNewEntryFits) {
  const std::vector<EntryUse> entries = {
      {"a", 400, 30, false}, {"b", 300, 10, false}, {"c", 200, 20, false}};
  // 900 used, budget 1000: 100 free. 250 incoming needs 150 more: b (oldest) goes.
  EXPECT_EQ(choose_evictions(entries, 1000, 250), (std::vector<size_t>{1}));
  // 450 incoming: b then c.
  EXPECT_EQ(choose_evictions(entries, 1000, 450), (std::vector<size_t>{1, 2}));
  EXPECT_EQ(choose_evictions(entries, 1000, 100), std::vector<size_t>{});
  EXPECT_EQ(choose_evictions(entries, 0, 5000), std::vector<size_t>{});  // no budget
}

TEST(EvictionTest, PinnedEntriesStayAndTooBigIsNullopt) {
  const std::vector<EntryUse> entries = {{"a", 400, 30, false}, {"b", 300, 10, true}};
  EXPECT_EQ(choose_evictions(entries, 1000, 500), (std::vector<size_t>{0}));
  EXPECT_FALSE(choose_evictions(entries, 1000, 800).has_value());  // b is pinned
  EXPECT_FALSE(choose_evictions({}, 1000, 1001).has_value());
}

}  // namespace
}  // namespace keel::store
