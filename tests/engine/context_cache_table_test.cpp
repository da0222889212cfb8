// ContextCacheTable on a manual clock: a cache expires at its deadline for every reader before the
// owner sweeps it, and the sweep hands back its pin exactly once; a cache is seen only with its own
// salt (find, list, remove); a cache of the same id replaces the old one and returns its pin;
// list is oldest first; a removed cache's pin leaves once and an expired one cannot be removed.
#include "engine/context_cache_table.h"

#include <gtest/gtest.h>

namespace keel::engine {
namespace {

using Pin = ContextCacheTable::Pin;
constexpr int64_t kMs = 1'000'000;

ContextCacheInfo cache(std::string id, std::string salt, int64_t ttl_ms) {
  ContextCacheInfo c;
  c.id = std::move(id);
  c.cache_salt = std::move(salt);
  c.tokens = {1, 2, 3};
  c.description = "d-" + c.id;
  c.ttl_ms = ttl_ms;
  return c;
}

TEST(ContextCacheTableTest, ExpiresOnTheOwnersClockForEveryReader) {
  ManualClock clock;
  ContextCacheTable t(&clock);
  EXPECT_FALSE(t.put(cache("a", "", 10), Pin{1, 2}).has_value());
  EXPECT_FALSE(t.put(cache("b", "", 20), Pin{2, 3}).has_value());
  EXPECT_EQ(t.next_deadline_ns(), 10 * kMs);
  ASSERT_TRUE(t.find("a", "").has_value());
  EXPECT_EQ(t.find("a", "")->description, "d-a");
  EXPECT_TRUE(t.take_expired().empty());

  clock.advance_ns(10 * kMs);  // "a" reaches its deadline: gone for readers before any sweep
  EXPECT_FALSE(t.find("a", "").has_value());
  EXPECT_EQ(t.list("").size(), 1u);
  EXPECT_FALSE(t.remove("a", "").has_value());  // expired: the sweep owns its pin
  EXPECT_EQ(t.pins().size(), 2u);               // still pinned until swept
  EXPECT_EQ(t.take_expired(), std::vector<Pin>{(Pin{1, 2})});
  EXPECT_TRUE(t.take_expired().empty());  // once
  EXPECT_EQ(t.pins(), std::vector<Pin>{(Pin{2, 3})});
  EXPECT_EQ(t.next_deadline_ns(), 20 * kMs);

  clock.advance_ns(10 * kMs);
  EXPECT_TRUE(t.list("").empty());
  EXPECT_EQ(t.take_expired(), std::vector<Pin>{(Pin{2, 3})});
  EXPECT_FALSE(t.next_deadline_ns().has_value());
}

TEST(ContextCacheTableTest, ACacheBelongsToItsSalt) {
  ManualClock clock;
  ContextCacheTable t(&clock);
  t.put(cache("a", "tenant-a", 1000), Pin{1, 1});
  t.put(cache("open", "", 1000), Pin{2, 1});
  EXPECT_TRUE(t.find("a", "tenant-a").has_value());
  EXPECT_FALSE(t.find("a", "tenant-b").has_value());
  EXPECT_FALSE(t.find("a", "").has_value());
  EXPECT_FALSE(t.find("open", "tenant-a").has_value());
  ASSERT_EQ(t.list("tenant-a").size(), 1u);
  EXPECT_EQ(t.list("tenant-a")[0].id, "a");
  EXPECT_TRUE(t.list("tenant-b").empty());
  EXPECT_FALSE(t.remove("a", "tenant-b").has_value());  // another salt cannot remove it
  EXPECT_TRUE(t.find("a", "tenant-a").has_value());
  EXPECT_EQ(t.remove("a", "tenant-a"), (Pin{1, 1}));
  EXPECT_FALSE(t.remove("a", "tenant-a").has_value());  // once
  EXPECT_EQ(t.pins(), std::vector<Pin>{(Pin{2, 1})});
}

TEST(ContextCacheTableTest, SameIdReplacesAndListIsOldestFirst) {
  ManualClock clock;
  ContextCacheTable t(&clock);
  t.put(cache("z", "", 1000), Pin{1, 1});
  clock.advance_ns(kMs);
  t.put(cache("a", "", 1000), Pin{2, 1});
  clock.advance_ns(kMs);
  t.put(cache("m", "", 1000), Pin{3, 1});
  std::vector<std::string> ids;
  for (const ContextCacheInfo& c : t.list("")) ids.push_back(c.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"z", "a", "m"}));
  // Replacing "z" hands back its pin and restarts its ttl.
  EXPECT_EQ(t.put(cache("z", "", 5000), Pin{4, 2}), (Pin{1, 1}));
  EXPECT_EQ(t.pins().size(), 3u);
  clock.advance_ns(2000 * kMs);
  ASSERT_TRUE(t.find("z", "").has_value());
  EXPECT_EQ(t.find("z", "")->ttl_ms, 5000);
  EXPECT_EQ(t.take_expired().size(), 2u);  // "a" and "m"
  EXPECT_EQ(t.pins(), std::vector<Pin>{(Pin{4, 2})});
}

}  // namespace
}  // namespace keel::engine
