// SemiPdEngine with a real model (stories260K): the hand-off moves the block table prefill wrote
// to decode without taking or returning a block; greedy outputs of concurrent requests equal the
// colocated engine's (also with chunked prefill and under KV pressure, where decode preempts back
// to prefill); a re-split under load changes no output and is measured; abort frees blocks;
// unsupported features are refused; the controller's window sees the samples.
#include "engine/semi_pd_engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <thread>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

EngineConfig semi_pd_config(SemiPdSplit split = {1, 1}) {
  EngineConfig c = base_config();
  c.semi_pd = split;
  return c;
}

std::vector<std::vector<int32_t>> test_prompts(int n) {
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> p = {1};
    for (int j = 0; j < 5 + 9 * i; ++j) p.push_back(259 + (i * 31 + j * 7) % 240);
    prompts.push_back(p);
  }
  return prompts;
}

// Each prompt alone through the colocated engine.
std::vector<std::vector<int32_t>> colocated_outputs(const model::Model& model,
                                                    const std::vector<std::vector<int32_t>>& ps,
                                                    int32_t max_tokens) {
  auto e = Engine::start(model, base_config());
  EXPECT_TRUE(e.ok());
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : ps) out.push_back(run_one(**e, greedy(p, max_tokens)));
  return out;
}

// Submits every prompt at once; returns the outputs in order.
std::vector<std::vector<int32_t>> run_all(SemiPdEngine& e,
                                          const std::vector<std::vector<int32_t>>& ps,
                                          int32_t max_tokens) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const auto& p : ps) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(e.submit(greedy(p, max_tokens), sinks.back()).ok());
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : sinks) out.push_back(s->wait());
  return out;
}

TEST(SemiPdEngineTest, HandOffMovesTheBlockTableWithoutTakingABlock) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  std::mutex mu;
  std::vector<SemiPdHandOff> seen;
  SemiPdDeps deps;
  deps.on_hand_off = [&](const SemiPdHandOff& h) {
    std::lock_guard lock(mu);
    seen.push_back(h);
  };
  auto e = SemiPdEngine::start(*model, semi_pd_config(), std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  // 40 prompt tokens: 3 blocks of 16, all written by prefill.
  std::vector<int32_t> prompt = {1};
  for (int j = 0; j < 39; ++j) prompt.push_back(300 + j);
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE((*e)->submit(greedy(prompt, 8), sink).ok());
  EXPECT_EQ(sink->wait().size(), 8u);
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 1u);
  const SemiPdHandOff& h = seen[0];
  EXPECT_EQ(h.prefill_blocks.size(), 3u);
  EXPECT_EQ(h.decode_blocks, h.prefill_blocks);  // the same ids: nothing copied
  EXPECT_EQ(h.allocated_sent, 3);                // only this request's blocks
  EXPECT_EQ(h.allocated_received, h.allocated_sent);
  EXPECT_TRUE(eventually([&] { return (*e)->block_allocator().num_allocated() == 0; }));
  EXPECT_TRUE((*e)->block_allocator().check_invariants().ok());
}

TEST(SemiPdEngineTest, GreedyEqualsColocatedForConcurrentRequests) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const auto prompts = test_prompts(8);
  const auto expected = colocated_outputs(*model, prompts, 24);
  struct Variant {
    const char* name;
    void (*tweak)(EngineConfig&);
  };
  const Variant variants[] = {
      {"default", [](EngineConfig&) {}},
      {"chunked-prefill", [](EngineConfig& c) { c.scheduler.max_batched_tokens = 16; }},
      {"kv-pressure",
       [](EngineConfig& c) {  // decode runs out of blocks and preempts back to prefill
         c.block_size = 4;
         c.kv_cache_bytes = 40 * 4 * 5 * 2 * 32 * 4;  // 40 blocks of 4 tokens
       }},
  };
  for (const Variant& v : variants) {
    EngineConfig c = semi_pd_config();
    v.tweak(c);
    auto e = SemiPdEngine::start(*model, c);
    ASSERT_TRUE(e.ok()) << v.name << ": " << e.error().to_string();
    const auto got = run_all(**e, prompts, 24);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(got[i], expected[i]) << v.name << " request " << i;
    }
    EXPECT_TRUE(eventually([&] { return (*e)->block_allocator().num_allocated() == 0; })) << v.name;
    EXPECT_TRUE((*e)->block_allocator().check_invariants().ok()) << v.name;
    if (std::string(v.name) == "kv-pressure") {
      EXPECT_GT((*e)->stats().num_preemptions_total, 0) << "the KV budget was meant to preempt";
    }
  }
}

TEST(SemiPdEngineTest, ReSplitUnderLoadKeepsOutputsAndIsMeasured) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const auto prompts = test_prompts(8);
  const auto expected = colocated_outputs(*model, prompts, 32);
  auto e = SemiPdEngine::start(*model, semi_pd_config());
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  const int32_t cores = static_cast<int32_t>(allowed_cores().size());
  const int32_t big = std::min(2, cores);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const auto& p : prompts) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE((*e)->submit(greedy(p, 32), sinks.back()).ok());
  }
  // Re-split while they run: each switch lands at the workers' next step boundaries.
  const SemiPdSplit splits[] = {{big, 1}, {1, big}, {big, big}, {1, 1}};
  for (const SemiPdSplit& s : splits) {
    ASSERT_TRUE((*e)->set_split(s).ok());
    EXPECT_EQ((*e)->split(), s);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(sinks[i]->wait(), expected[i]) << i;
  const MetricsSnapshot m = (*e)->metrics();
  ASSERT_TRUE(m.semi_pd.has_value());
  EXPECT_EQ(m.semi_pd->split_prefill, 1);
  EXPECT_EQ(m.semi_pd->split_decode, 1);
  EXPECT_EQ(m.semi_pd->num_switches, big > 1 ? 4 : 0);
  if (big > 1) {  // a worker that switched observed its downtime
    EXPECT_GT(m.semi_pd->switch_seconds.count, 0u);
    EXPECT_TRUE(eventually([&] { return (*e)->metrics().semi_pd->decode_threads == 1; }));
  }
  EXPECT_FALSE((*e)->set_split({0, 1}).ok());
  EXPECT_FALSE((*e)->set_split({1, cores + 1}).ok());
}

TEST(SemiPdEngineTest, AbortFreesBlocksAndWindowHasSamples) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = SemiPdEngine::start(*model, semi_pd_config());
  ASSERT_TRUE(e.ok());
  SemiPdEngine& engine = **e;
  run_all(engine, test_prompts(2), 6);
  // A request's last event comes just before the engine forgets it (and samples its TPOT).
  ASSERT_TRUE(eventually([&] { return engine.stats().num_tracked == 0; }));
  const SemiPdWindow w = engine.take_window();
  EXPECT_EQ(w.ttft_seconds.size(), 2u);
  EXPECT_EQ(w.tpot_seconds.size(), 2u);
  EXPECT_EQ(w.split, (SemiPdSplit{1, 1}));
  EXPECT_EQ(w.num_arrivals, 2);  // the controller's λ′ inputs
  EXPECT_EQ(w.num_prefills, 2);
  EXPECT_GT(w.prefill_busy_core_s, 0.0);
  EXPECT_GT(w.duration_s, 0.0);
  EXPECT_FALSE(w.split_changed);
  const SemiPdWindow next = engine.take_window();  // taken
  EXPECT_TRUE(next.ttft_seconds.empty());
  EXPECT_EQ(next.num_arrivals, 0);
  EXPECT_EQ(next.prefill_busy_core_s, 0.0);

  auto sink = std::make_shared<CollectingSink>();
  auto key = engine.submit(greedy({1, 403, 407, 261, 378}, 200), sink);
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(eventually([&] {
    return engine.stats().generation_tokens_total > 0 ||
           engine.block_allocator().num_allocated() > 0;
  }));
  engine.abort(*key);
  sink->wait();
  EXPECT_EQ(sink->finish(), FinishReason::kAbort);
  EXPECT_TRUE(eventually([&] { return engine.block_allocator().num_allocated() == 0; }));
  EXPECT_TRUE(eventually([&] { return engine.stats().num_tracked == 0; }));
}

TEST(SemiPdEngineTest, RefusesWhatItDoesNotRun) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = SemiPdEngine::start(*model, semi_pd_config());
  ASSERT_TRUE(e.ok());
  GenerationRequest r = greedy({1, 300}, 4);
  r.lora = "x";
  auto res = (*e)->submit(r, std::make_shared<CollectingSink>());
  ASSERT_FALSE(res.ok());
  EXPECT_NE(res.error().message().find("not supported in --mode semi-pd"), std::string::npos);
  r = greedy({1, 300}, 4);
  r.retain_as = "c";
  EXPECT_FALSE((*e)->submit(r, std::make_shared<CollectingSink>()).ok());
  EXPECT_FALSE((*e)->submit(greedy({}, 4), std::make_shared<CollectingSink>()).ok());
  EXPECT_FALSE((*e)->submit(greedy({1, 1 << 20}, 4), std::make_shared<CollectingSink>()).ok());
  EngineConfig bad = semi_pd_config({1, 1 << 20});
  EXPECT_FALSE(SemiPdEngine::start(*model, bad).ok());
}

}  // namespace
}  // namespace keel::engine
