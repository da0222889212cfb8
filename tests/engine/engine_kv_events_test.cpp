// The engine's cache events (EngineDeps::cache_events) with a real model (stories260K): a prompt's
// full blocks are reported stored with the keys a router computes from its tokens
// (prefix_block_hashes: kv::hash_block's chain), in chain order with their tokens; a small pool's
// evictions are reported removed, each for a key stored before; without a sink nothing is logged.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <vector>

#include "engine/model_identity.h"
#include "engine_test_util.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 16;

class EventLog {
 public:
  std::function<void(std::vector<kv::CacheEvent>)> sink() {
    return [this](std::vector<kv::CacheEvent> events) {
      std::lock_guard lock(mu_);
      ++calls_;
      for (kv::CacheEvent& e : events) events_.push_back(std::move(e));
    };
  }
  std::vector<kv::CacheEvent> of(kv::CacheEventKind kind) {
    std::lock_guard lock(mu_);
    std::vector<kv::CacheEvent> out;
    for (const kv::CacheEvent& e : events_) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::vector<kv::CacheEvent> all() {
    std::lock_guard lock(mu_);
    return events_;
  }

 private:
  std::mutex mu_;
  std::vector<kv::CacheEvent> events_;
  int calls_ = 0;
};

std::vector<int32_t> prompt(int32_t base, int32_t n) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(base + i);
  return p;
}

TEST(EngineKvEventsTest, StoredBlocksCarryThePromptsHashChain) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EventLog log;
  EngineDeps deps;
  deps.cache_events = log.sink();
  EngineConfig c = base_config();
  c.block_size = kBlock;
  auto e = Engine::start(*model, c, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  const std::vector<int32_t> p = prompt(100, 40);  // 2 full blocks (+ 4 generated: still 2)
  run_one(**e, greedy(p, 4));
  const std::vector<kv::BlockHash> want = prefix_block_hashes((*e)->model_key(), "", p, kBlock);
  ASSERT_EQ(want.size(), 2u);
  ASSERT_TRUE(eventually([&] { return log.of(kv::CacheEventKind::kStored).size() >= 2; }));
  const std::vector<kv::CacheEvent> stored = log.of(kv::CacheEventKind::kStored);
  ASSERT_EQ(stored.size(), 2u);
  EXPECT_EQ(stored[0].hash, want[0]);
  EXPECT_EQ(stored[0].parent, kv::kRootHash);
  EXPECT_EQ(stored[0].tokens, std::vector<int32_t>(p.begin(), p.begin() + kBlock));
  EXPECT_EQ(stored[1].hash, want[1]);
  EXPECT_EQ(stored[1].parent, want[0]);
  EXPECT_EQ(stored[1].tokens, std::vector<int32_t>(p.begin() + kBlock, p.begin() + 2 * kBlock));
  EXPECT_TRUE(log.of(kv::CacheEventKind::kRemoved).empty());

  // A repeat hits the cache: nothing new is stored.
  run_one(**e, greedy(p, 4));
  e->reset();  // joins the engine thread: every event has been handed over
  EXPECT_EQ(log.of(kv::CacheEventKind::kStored).size(), 2u);
}

TEST(EngineKvEventsTest, EvictionsInASmallPoolAreReportedRemoved) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EventLog log;
  EngineDeps deps;
  deps.cache_events = log.sink();
  EngineConfig c = base_config();
  c.block_size = kBlock;
  c.scheduler.max_num_seqs = 1;
  c.kv_cache_bytes = 12 * 5 * 2 * kBlock * 32 * 4;  // 12 blocks (stories260K: 5 layers, kv_dim 32)
  auto e = Engine::start(*model, c, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  ASSERT_EQ((*e)->num_kv_blocks(), 12);
  const std::vector<int32_t> first = prompt(300, 64);
  run_one(**e, greedy(first, 4));
  const std::vector<kv::BlockHash> first_keys =
      prefix_block_hashes((*e)->model_key(), "", first, kBlock);
  for (int32_t base : {100, 160, 220, 280}) run_one(**e, greedy(prompt(base, 64), 4));
  e->reset();

  std::vector<kv::BlockHash> live;  // replaying the log: stored adds, removed must find its key
  for (const kv::CacheEvent& ev : log.all()) {
    if (ev.kind == kv::CacheEventKind::kStored) {
      EXPECT_EQ(std::count(live.begin(), live.end(), ev.hash), 0);
      live.push_back(ev.hash);
    } else if (ev.kind == kv::CacheEventKind::kRemoved) {
      const auto it = std::find(live.begin(), live.end(), ev.hash);
      ASSERT_NE(it, live.end()) << "removed a key never stored";
      live.erase(it);
    }
  }
  EXPECT_LE(live.size(), 12u);  // never more keys than blocks
  const std::vector<kv::CacheEvent> removed = log.of(kv::CacheEventKind::kRemoved);
  // The later prompts pushed the first one's blocks out of the pool.
  for (const kv::BlockHash& k : first_keys) {
    EXPECT_TRUE(std::any_of(removed.begin(), removed.end(),
                            [&](const kv::CacheEvent& ev) { return ev.hash == k; }));
  }
  EXPECT_TRUE(log.of(kv::CacheEventKind::kCleared).empty());
}

TEST(EngineKvEventsTest, WithoutASinkNothingIsRecorded) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, base_config());
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  EXPECT_EQ(run_one(**e, greedy(prompt(100, 40), 2)).size(), 2u);
}

}  // namespace
}  // namespace keel::engine
