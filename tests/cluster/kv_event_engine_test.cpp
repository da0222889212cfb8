// End to end with a real model (stories260K): an engine whose cache events go through
// publishing_sink to a KvEventPublisher, and a KvEventSubscriber that joins late — it receives
// vLLM BlockStored events whose hashes are the low 64 bits of the prompt's prefix keys
// (prefix_block_hashes, what a router computes from tokens), with the tokens, block size and the
// "pool" medium.
#include <gtest/gtest.h>

#include <mutex>
#include <vector>

#include "../engine/engine_test_util.h"
#include "cluster/kv_events/kv_event_convert.h"
#include "cluster/kv_events/kv_event_publisher.h"
#include "cluster/kv_events/kv_event_subscriber.h"
#include "engine/model_identity.h"

namespace keel::cluster {
namespace {

constexpr int32_t kBlock = 16;

std::vector<int32_t> prompt(int32_t base, int32_t n) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(base + i);
  return p;
}

TEST(KvEventEngineTest, ASubscriberSeesTheEnginesBlocksInVllmFormat) {
  KEEL_REQUIRE_SHARED();
  auto model = engine::load_stories();
  ASSERT_NE(model, nullptr);
  auto pub = KvEventPublisher::start({});
  ASSERT_TRUE(pub.ok()) << pub.error().to_string();
  // The attachment: the engine's sink converts each step's events and queues them to the
  // publisher (which must outlive the engine).
  engine::EngineDeps deps;
  deps.cache_events = publishing_sink(pub->get(), kBlock);
  engine::EngineConfig c = engine::base_config();
  c.block_size = kBlock;
  auto e = engine::Engine::start(*model, c, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();

  const std::vector<int32_t> p = prompt(100, 40);
  engine::run_one(**e, engine::greedy(p, 4));
  ASSERT_TRUE(testing::eventually([&] { return (*pub)->stats().published >= 1; }));

  std::mutex mu;
  std::vector<BlockStored> stored;
  KvEventSubscriberConfig sc;
  sc.sources.push_back({"te0", (*pub)->endpoint(), (*pub)->replay_endpoint()});
  auto sub = KvEventSubscriber::start(sc, [&](const std::string&, int64_t, const KvEventBatch& b) {
    std::lock_guard lock(mu);
    for (const KvEvent& ev : b.events) {
      if (const auto* s = std::get_if<BlockStored>(&ev)) stored.push_back(*s);
    }
  });
  ASSERT_TRUE(sub.ok()) << sub.error().to_string();
  // Later prompts make live batches; the first one received fills the history from the replay.
  int32_t base = 200;
  ASSERT_TRUE(testing::eventually([&] {
    engine::run_one(**e, engine::greedy(prompt(base += 50, 20), 1));
    std::lock_guard lock(mu);
    return !stored.empty();
  }));
  (*sub)->stop();

  const std::vector<kv::BlockHash> keys =
      engine::prefix_block_hashes((*e)->model_key(), "", p, kBlock);
  ASSERT_EQ(keys.size(), 2u);
  std::lock_guard lock(mu);
  ASSERT_FALSE(stored.empty());
  const BlockStored& first = stored.front();
  EXPECT_EQ(first.block_hashes, (std::vector<uint64_t>{keys[0].lo, keys[1].lo}));
  EXPECT_FALSE(first.parent_block_hash.has_value());
  EXPECT_EQ(first.token_ids, std::vector<int32_t>(p.begin(), p.begin() + 2 * kBlock));
  EXPECT_EQ(first.block_size, kBlock);
  EXPECT_EQ(first.medium, std::optional<std::string>("pool"));
  EXPECT_EQ((*sub)->stats().lost, 0);
}

}  // namespace
}  // namespace keel::cluster
