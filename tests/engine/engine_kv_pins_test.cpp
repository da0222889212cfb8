// KV kept across tool calls through the engine with a real model (stories260K): a keep_kv request
// that stops leaves its prompt + output blocks pinned, so the next turn — a prompt that extends
// them — is served from the cache after other prompts churned every unpinned block out of a small
// pool (and without keep_kv it is not); the front end's release, the TTL and a length finish
// leave nothing pinned; a request that cannot run beside the pins gets their blocks; the stats
// count pins and releases. Outputs always equal the fully computed run.
#include <gtest/gtest.h>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

constexpr int32_t kPinBlock = 16;

std::vector<int32_t> pin_tokens(int32_t base, int32_t n) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < n; ++i) p.push_back(base + i);
  return p;
}

// 16 blocks of 16 (stories260K: 5 layers, 32 KV values per layer and token, f32); pins may hold
// half of them.
EngineConfig pin_pool(double ttl_s = 60) {
  EngineConfig c = base_config();
  c.block_size = kPinBlock;
  c.scheduler.max_num_seqs = 1;
  c.kv_cache_bytes = 16 * 5 * 2 * kPinBlock * 32 * 4;
  c.kv_pin_ttl_s = ttl_s;
  c.kv_pin_max_fraction = 0.5;
  return c;
}

// Turn 1: the 48-token history, stopped by its first greedy token (kStop, as a tool call ends).
GenerationRequest turn1(Engine& e, bool keep_kv) {
  const std::vector<int32_t> first = run_one(e, greedy(pin_tokens(300, 48), 1));
  GenerationRequest r = greedy(pin_tokens(300, 48), 4);
  r.ignore_eos = false;
  r.stop_token_ids = first;
  r.keep_kv = keep_kv;
  return r;
}

// Other traffic: prompts that together need more than the pool.
void pin_churn(Engine& e) {
  for (int32_t base : {10, 60, 110, 160, 210, 260}) run_one(e, greedy(pin_tokens(base, 50), 4));
}

// Turn 2: the history, then a 20-token tool result; greedy output and cached prompt tokens.
struct Turn2 {
  std::vector<int32_t> out;
  int cached = 0;
};
Turn2 turn2(Engine& e) {
  std::vector<int32_t> p = pin_tokens(300, 48);
  for (int32_t i = 0; i < 20; ++i) p.push_back(400 + i);
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_TRUE(e.submit(greedy(p, 8), sink).ok());
  Turn2 t;
  t.out = sink->wait();
  t.cached = sink->cached();
  return t;
}

TEST(EngineKvPinsTest, APinnedTurnSurvivesChurnAndIsReused) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig plain = pin_pool();
  plain.enable_prefix_cache = false;
  auto ref = Engine::start(*model, plain);
  ASSERT_TRUE(ref.ok()) << ref.error().to_string();
  const Turn2 want = turn2(**ref);

  for (const bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "keep_kv" : "no keep_kv");
    auto e = Engine::start(*model, pin_pool());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    Engine& engine = **e;
    auto sink = std::make_shared<CollectingSink>();
    ASSERT_TRUE(engine.submit(turn1(engine, keep), sink).ok());
    sink->wait();
    EXPECT_EQ(sink->finish(), FinishReason::kStop);
    if (keep) {
      // 48 history tokens: 3 full blocks (the stop token was never computed).
      EXPECT_TRUE(eventually([&] { return engine.stats().kv_pinned_blocks == 3; }));
      EXPECT_EQ(engine.stats().num_kv_pins, 1);
      EXPECT_EQ(engine.stats().kv_pins_total, 1);
    }
    pin_churn(engine);
    const Turn2 got = turn2(engine);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.cached, keep ? 48 : 0);
  }
}

TEST(EngineKvPinsTest, ReleaseTtlAndLengthLeaveNothingPinned) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, pin_pool(/*ttl_s=*/0.5));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  Engine& engine = **e;
  // The front end releases a turn that did not end in a tool call.
  auto sink = std::make_shared<CollectingSink>();
  auto key = engine.submit(turn1(engine, true), sink);
  ASSERT_TRUE(key.ok());
  sink->wait();
  EXPECT_TRUE(eventually([&] { return engine.stats().num_kv_pins == 1; }));
  engine.release_kv_pin(*key);
  engine.release_kv_pin(*key);  // once; unknown keys are ignored
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return s.num_kv_pins == 0 && s.kv_pins_released_unused == 1 && s.kv_usage == 0.0f;
  }));
  // Left alone, a pin goes at its TTL: the idle engine wakes up for it.
  run_one(engine, turn1(engine, true));
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return s.num_kv_pins == 0 && s.kv_pins_released_ttl == 1 && s.kv_usage == 0.0f;
  }));
  // A length finish (a call cut short is no call) pins nothing.
  GenerationRequest cut = greedy(pin_tokens(300, 48), 2);
  cut.keep_kv = true;
  run_one(engine, cut);
  run_one(engine, greedy(pin_tokens(10, 20), 2));  // its steps publish the stats after cut's end
  EXPECT_TRUE(eventually([&] { return engine.stats().num_tracked == 0; }));
  EXPECT_EQ(engine.stats().kv_pins_total, 2);
}

// Pins must not stall the engine: a request that needs more blocks than the pins leave, while
// nothing else runs, gets them from the oldest pin rather than waiting for its TTL.
TEST(EngineKvPinsTest, APinGivesWayToARequestThatCannotRunOtherwise) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, pin_pool());
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  Engine& engine = **e;
  run_one(engine, turn1(engine, true));
  EXPECT_TRUE(eventually([&] { return engine.stats().num_kv_pins == 1; }));
  // 224 tokens: 14 blocks of 16, one more than the 13 the pin leaves.
  const std::vector<int32_t> out = run_one(engine, greedy(pin_tokens(20, 220), 4));
  EXPECT_EQ(out.size(), 4u);
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return s.num_kv_pins == 0 && s.kv_pins_released_pressure == 1;
  }));
}

}  // namespace
}  // namespace keel::engine
