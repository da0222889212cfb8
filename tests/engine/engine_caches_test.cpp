// Explicit context caches through the engine with a real model (stories260K): a request with
// retain_as keeps its KV blocks pinned after it finishes, so a later prompt that extends it reuses
// them even after other prompts churned every unpinned block out of a small pool (and without
// the pin it does not); the engine owns each cache (find, list and release with its salt only;
// gone for callers at its deadline); release and expiry return the blocks; the pin budget (half
// the pool) is enforced at submit. Outputs always equal the fully computed run.
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 16;

std::vector<int32_t> tokens(int32_t base, int32_t n) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(base + i);
  return p;
}

EngineConfig small_pool() {
  EngineConfig c = base_config();
  c.block_size = kBlock;
  c.scheduler.max_num_seqs = 1;
  c.kv_cache_bytes = 16 * 5 * 2 * kBlock * 32 * 4;  // 16 blocks (stories260K: 5 layers, 32, f32)
  return c;
}

GenerationRequest cache_request(std::vector<int32_t> prompt, std::string id, int64_t ttl_ms) {
  GenerationRequest r = greedy(std::move(prompt), 1);
  r.retain_as = std::move(id);
  r.retain_ms = ttl_ms;
  return r;
}

// Prompts that together need more than the pool: every unpinned cached block is evicted.
void churn(Engine& e) {
  for (int32_t base : {10, 60, 110, 160, 210, 260}) run_one(e, greedy(tokens(base, 50), 4));
}

// The 48-token context, then a 20-token question: greedy output and cached prompt tokens.
struct Outcome {
  std::vector<int32_t> out;
  int cached = 0;
};
Outcome ask(Engine& e) {
  std::vector<int32_t> p = tokens(300, 48);
  for (int32_t i = 0; i < 20; ++i) p.push_back(400 + i);
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_TRUE(e.submit(greedy(p, 8), sink).ok());
  Outcome o;
  o.out = sink->wait();
  o.cached = sink->cached();
  return o;
}

// An engine over small_pool() (stories260K).
class SmallPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    auto e = Engine::start(*model_, small_pool());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    engine_ = std::move(e).value();
  }
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<Engine> engine_;
};

TEST(EngineCachesTest, PinnedContextSurvivesChurnAndIsReused) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig plain = small_pool();
  plain.enable_prefix_cache = false;
  auto ref = Engine::start(*model, plain);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const Outcome want = ask(**ref);
  EXPECT_EQ(want.cached, 0);

  for (const bool pin : {true, false}) {
    SCOPED_TRACE(pin ? "pinned" : "not pinned");
    auto e = Engine::start(*model, small_pool());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    Engine& engine = **e;
    ASSERT_EQ(engine.num_kv_blocks(), 16);
    GenerationRequest r = greedy(tokens(300, 48), 1);
    if (pin) r = cache_request(tokens(300, 48), "ctx", 60'000);
    run_one(engine, r);
    if (pin) {
      EXPECT_TRUE(eventually([&] { return engine.stats().num_context_caches == 1; }));
      EXPECT_EQ(engine.stats().context_cache_blocks, 3);  // 48 tokens (the sample needs no block)
    }
    churn(engine);
    const Outcome got = ask(engine);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.cached, pin ? 48 : 0);
    if (pin) {
      EXPECT_TRUE(engine.release_cache("ctx", ""));
      EXPECT_TRUE(eventually([&] {
        const EngineStats s = engine.stats();
        return s.num_context_caches == 0 && s.context_cache_blocks == 0 && s.kv_usage == 0.0f;
      }));
    }
  }
}

TEST_F(SmallPoolTest, ExpiryReleasesTheBlocks) {
  Engine& engine = *engine_;
  GenerationRequest r = cache_request(tokens(300, 40), "short", 1500);
  r.cache_salt = "tenant";
  r.retain_description = "what the server keeps";
  run_one(engine, r);
  // The engine owns the cache: it is found (with its salt only) as soon as the request finished.
  const std::optional<ContextCacheInfo> found = engine.find_cache("short", "tenant");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->tokens, r.prompt_tokens);
  EXPECT_EQ(found->description, "what the server keeps");
  EXPECT_EQ(found->ttl_ms, 1500);
  EXPECT_FALSE(engine.find_cache("short", "").has_value());
  EXPECT_EQ(engine.list_caches("tenant").size(), 1u);
  EXPECT_TRUE(engine.list_caches("").empty());
  EXPECT_FALSE(engine.release_cache("short", "other"));
  // (Stats are published after the final event: wait for the pin to show.)
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return s.num_context_caches == 1 && s.kv_usage > 0.0f;
  }));
  // Nothing else happens: the idle engine thread wakes up for the deadline by itself, and the
  // cache is gone for callers from its deadline on.
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return s.num_context_caches == 0 && s.kv_usage == 0.0f;
  }));
  EXPECT_FALSE(engine.find_cache("short", "tenant").has_value());
  EXPECT_TRUE(engine.list_caches("tenant").empty());
  EXPECT_FALSE(engine.release_cache("short", "tenant"));
  // A cache of the same id replaces the old one (its blocks are released, not leaked).
  run_one(engine, cache_request(tokens(300, 40), "same", 60'000));
  EXPECT_TRUE(eventually([&] { return engine.stats().num_context_caches == 1; }));
  run_one(engine, cache_request(tokens(440, 40), "same", 60'000));
  EXPECT_TRUE(eventually([&] { return engine.stats().context_cache_blocks == 3; }));
  EXPECT_EQ(engine.stats().num_context_caches, 1);
}

TEST_F(SmallPoolTest, PinBudgetIsHalfThePool) {
  Engine& engine = *engine_;
  auto sink = std::make_shared<CollectingSink>();
  // 8 blocks fit (half of 16); then a 2-block cache does not.
  EXPECT_TRUE(engine.submit(cache_request(tokens(300, 120), "a", 60'000), sink).ok());
  sink->wait();
  auto too_many = engine.submit(cache_request(tokens(200, 20), "b", 60'000),
                                std::make_shared<CollectingSink>());
  ASSERT_FALSE(too_many.ok());
  // A refusal a retry cannot fix: OutOfRange (400), not ResourceExhausted (429 "retry later").
  EXPECT_EQ(too_many.error().code(), StatusCode::kOutOfRange);
  EXPECT_NE(too_many.error().message().find("half the pool"), std::string::npos);
  // Larger than the whole quota: the same, whatever is held.
  auto too_big = engine.submit(cache_request(tokens(100, 150), "big", 60'000),
                               std::make_shared<CollectingSink>());
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.error().code(), StatusCode::kOutOfRange);
  // A released cache gives its reservation back (stats are published after the final event:
  // see the pin first, so that the wait below sees the release).
  EXPECT_TRUE(eventually([&] { return engine.stats().num_context_caches == 1; }));
  EXPECT_TRUE(engine.release_cache("a", ""));
  EXPECT_FALSE(engine.find_cache("a", "").has_value());  // gone at once for callers
  EXPECT_FALSE(engine.release_cache("a", ""));           // once
  EXPECT_TRUE(eventually([&] { return engine.stats().num_context_caches == 0; }));
  EXPECT_TRUE(
      engine.submit(cache_request(tokens(200, 20), "b", 60'000), std::make_shared<CollectingSink>())
          .ok());
  auto bad = cache_request(tokens(200, 20), "c", 0);
  EXPECT_FALSE(engine.submit(bad, std::make_shared<CollectingSink>()).ok());
}

}  // namespace
}  // namespace keel::engine
