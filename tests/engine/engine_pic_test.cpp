// EPIC through the engine with a real model (stories260K): a request whose prompt holds
// position-independent chunks has them compiled by internal requests (cached by their own
// tokens), linked at their real positions and repaired per its variant. LegoLink with k ≥ every
// chunk equals full recompute (also with a tiny token budget that splits the recomputes across
// steps, and without schedule-ahead); naive linking gives what the direct pic_prefill gives; a
// repeated chunk in another order comes from the chunk index without a compile; nothing but the
// chunk index holds blocks afterwards, also when a request is aborted while its chunks compile;
// the index stays within a quarter of the pool; bad chunk spans are refused. CacheBlend's probe
// runs as its own step: CacheBlend-100 equals full recompute.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <cmath>
#include <numeric>

#include "core/thread_pool.h"
#include "engine/pic_prefill.h"
#include "engine_test_util.h"

namespace keel::engine {
namespace {

// KV usage is exactly the chunk index's blocks (nothing else leaked), within a quarter of the pool.
bool only_the_index_holds_blocks(const Engine& e) {
  const EngineStats s = e.stats();
  const auto used = static_cast<int64_t>(std::lround(s.kv_usage * e.num_kv_blocks()));
  return used == s.pic_index_blocks && s.pic_index_blocks <= e.num_kv_blocks() / 4;
}

struct PicPrompt {
  std::vector<int32_t> tokens;
  std::vector<kv::PicChunk> chunks;
};

class EnginePicTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    auto e = Engine::start(*model_, base_config());
    ASSERT_TRUE(e.ok());
    for (int32_t first : {403, 300, 350, 420}) {  // story chunks: BOS, a word, greedy text
      std::vector<int32_t> c = {1, first};
      for (int32_t t : run_one(**e, greedy(c, 24 + first % 9))) c.push_back(t);
      chunks_.push_back(c);
    }
  }
  // Chunks in `order`, then a 5-token query.
  PicPrompt prompt(std::vector<int> order) const {
    PicPrompt p;
    for (int i : order) {
      p.chunks.push_back({static_cast<int32_t>(p.tokens.size()),
                          static_cast<int32_t>(chunks_[static_cast<size_t>(i)].size())});
      p.tokens.insert(p.tokens.end(), chunks_[static_cast<size_t>(i)].begin(),
                      chunks_[static_cast<size_t>(i)].end());
    }
    for (int32_t t : {403, 407, 261, 378, 300}) p.tokens.push_back(t);
    return p;
  }
  static GenerationRequest pic_request(const PicPrompt& p, const char* variant) {
    GenerationRequest r = greedy(p.tokens, 8);
    r.pic_chunks = p.chunks;
    r.pic_link = *kv::PicVariant::parse(variant);
    return r;
  }
  std::unique_ptr<model::Model> model_;
  std::vector<std::vector<int32_t>> chunks_;
};

TEST_F(EnginePicTest, LegoLinkOverWholeChunksEqualsFullRecompute) {
  const PicPrompt p = prompt({0, 1, 2});
  for (const bool ahead : {true, false}) {
    for (const int32_t budget : {512, 16}) {
      SCOPED_TRACE(::testing::Message() << "schedule-ahead " << ahead << ", budget " << budget);
      EngineConfig c = base_config();
      c.schedule_ahead = ahead;
      c.scheduler.max_batched_tokens = budget;
      auto e = Engine::start(*model_, c);
      ASSERT_TRUE(e.ok());
      const std::vector<int32_t> full = run_one(**e, greedy(p.tokens, 8));
      GenerationRequest r = pic_request(p, "legolink-64");
      r.cache_salt = "other";  // no prefix hit on the full run's blocks
      EXPECT_EQ(run_one(**e, r), full);
      GenerationRequest blend = pic_request(p, "cacheblend-100");
      blend.cache_salt = "blend";
      EXPECT_EQ(run_one(**e, blend), full);
      const EngineStats s = (*e)->stats();
      EXPECT_EQ(s.pic_requests, 2);
      EXPECT_EQ(s.pic_tokens_linked, 2 * p.chunks[0].len);  // only the leading chunk stays linked
      EXPECT_EQ(s.pic_tokens_recomputed,
                2 * (static_cast<int64_t>(p.tokens.size()) - p.chunks[0].len));
      EXPECT_TRUE(eventually([&] { return only_the_index_holds_blocks(**e); }));
    }
  }
}

TEST_F(EnginePicTest, NaiveLinkMatchesTheDirectComputationAndReusesChunks) {
  auto e = Engine::start(*model_, base_config());
  ASSERT_TRUE(e.ok());
  Engine& engine = **e;
  const PicPrompt p = prompt({2, 0, 1});
  // The direct computation of the same link: its first greedy token.
  ThreadPool pool(1);
  kernels::Ops ops(base_config().isa, &pool);
  model::Context ctx(*model_, 256);
  auto kv =
      model::KvStorage::create(model::KvLayout::for_model(model_->hparams(), 16, DType::kF32), 64);
  ASSERT_TRUE(kv.ok());
  std::vector<std::vector<int32_t>> tables;
  int32_t next = 0;
  for (const kv::PicChunk& c : p.chunks) {
    tables.push_back({next, next + 1, next + 2});
    next += 3;
    const std::span<const int32_t> toks(p.tokens.data() + c.start, static_cast<size_t>(c.len));
    ASSERT_TRUE(compile_chunk(ctx, *kv, ops, toks, tables.back()).ok());
  }
  std::vector<int32_t> seq_table(10);
  std::iota(seq_table.begin(), seq_table.end(), next);
  std::vector<float> logits;
  ASSERT_TRUE(pic_prefill(*model_, ctx, *kv, ops, p.tokens, p.chunks, tables, seq_table,
                          *kv::PicVariant::parse("naive"), &logits, nullptr)
                  .ok());
  const auto direct_first =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  ASSERT_TRUE(pic_prefill(*model_, ctx, *kv, ops, p.tokens, p.chunks, tables, seq_table,
                          *kv::PicVariant::parse("cacheblend-15"), &logits, nullptr)
                  .ok());
  const auto blend_first =
      static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());

  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(engine.submit(pic_request(p, "naive"), sink).ok());
  const std::vector<int32_t> out = sink->wait();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0], direct_first);
  int64_t chunk_tokens = 0;
  for (const kv::PicChunk& c : p.chunks) chunk_tokens += c.len;
  EXPECT_EQ(engine.stats().pic_tokens_linked, chunk_tokens);
  EXPECT_EQ(engine.stats().pic_tokens_recomputed, 5);  // the query only
  EXPECT_EQ(sink->cached(), chunk_tokens);             // usage reports linked tokens as cached
  EXPECT_EQ(engine.stats().pic_chunks_compiled, 3);
  // The same chunks in another order: all three come from the chunk index, none is compiled.
  run_one(engine, pic_request(prompt({1, 2, 0}), "naive"));
  EXPECT_EQ(engine.stats().pic_chunks_compiled, 3);
  EXPECT_EQ(engine.stats().pic_chunks_reused, 3);
  EXPECT_EQ(engine.stats().pic_tokens_linked, 2 * chunk_tokens);
  EXPECT_TRUE(eventually([&] { return only_the_index_holds_blocks(engine); }));
  // CacheBlend-15 through the engine (probe step, then its picks recomputed) starts like the
  // direct computation, and recomputes more than naive.
  const int64_t recomputed = engine.stats().pic_tokens_recomputed;
  GenerationRequest blend = pic_request(p, "cacheblend-15");
  blend.cache_salt = "blend";
  const std::vector<int32_t> blended = run_one(engine, blend);
  ASSERT_FALSE(blended.empty());
  EXPECT_EQ(blended[0], blend_first);
  EXPECT_GT(engine.stats().pic_tokens_recomputed - recomputed, 5);
}

TEST_F(EnginePicTest, AbortWhileCompilingAndBadRequests) {
  EngineConfig c = base_config();
  c.scheduler.max_batched_tokens = 16;  // compiles take several steps
  auto e = Engine::start(*model_, c);
  ASSERT_TRUE(e.ok());
  Engine& engine = **e;
  auto sink = std::make_shared<CollectingSink>();
  auto key = engine.submit(pic_request(prompt({0, 1, 2, 3}), "legolink-2"), sink);
  ASSERT_TRUE(key.ok());
  engine.abort(*key);
  sink->wait();
  EXPECT_EQ(sink->finish(), FinishReason::kAbort);
  EXPECT_TRUE(eventually([&] {
    const EngineStats s = engine.stats();
    return only_the_index_holds_blocks(engine) && s.num_running == 0 && s.num_waiting == 0;
  }));
  // The engine still serves PIC requests afterwards.
  EXPECT_EQ(run_one(engine, pic_request(prompt({0}), "naive")).size(), 8u);

  GenerationRequest bad = pic_request(prompt({0, 1}), "naive");
  bad.pic_chunks[1].start = 3;  // overlaps chunk 0
  EXPECT_EQ(engine.submit(bad, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
}

// A request aborted while a step that samples nothing for it is in flight (here: chunk compiles,
// aborted with their parent) is released once that step completes, so the engine goes idle. It
// used to keep such requests forever: the engine loop kept spinning and never shut down.
TEST_F(EnginePicTest, AbortedRequestsLeaveNothingTracked) {
  EngineConfig c = base_config();
  c.scheduler.max_batched_tokens = 16;
  auto e = Engine::start(*model_, c);
  ASSERT_TRUE(e.ok());
  Engine& engine = **e;
  for (int round = 0; round < 40; ++round) {
    auto sink = std::make_shared<CollectingSink>();
    auto key = engine.submit(pic_request(prompt({0, 1, 2, 3}), "legolink-2"), sink);
    ASSERT_TRUE(key.ok());
    if (round % 4 == 3) std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    engine.abort(*key);
    sink->wait();
    ASSERT_TRUE(eventually([&] { return engine.stats().num_tracked == 0; })) << "round " << round;
  }
}

TEST_F(EnginePicTest, ChunkIndexEvictsLeastRecentlyUsedChunksBeyondAQuarterOfThePool) {
  EngineConfig c = base_config();
  c.kv_cache_bytes = 28 * 5 * 2 * 16 * 32 * 4;  // 28 blocks: the index keeps at most 7
  auto e = Engine::start(*model_, c);
  ASSERT_TRUE(e.ok());
  Engine& engine = **e;
  ASSERT_EQ(engine.num_kv_blocks(), 28);
  const PicPrompt p = prompt({0, 1, 2, 3});  // 4 chunks of 2-3 blocks each
  const std::vector<int32_t> first = run_one(engine, pic_request(p, "naive"));
  EXPECT_TRUE(eventually([&] { return only_the_index_holds_blocks(engine); }));
  EXPECT_LE(engine.stats().pic_index_blocks, 7);
  EXPECT_GT(engine.stats().pic_index_blocks, 0);
  // Evicted chunks are compiled again; the output does not change.
  EXPECT_EQ(run_one(engine, pic_request(p, "naive")), first);
  EXPECT_GT(engine.stats().pic_chunks_compiled, 4);
  EXPECT_GT(engine.stats().pic_chunks_reused, 0);
  EXPECT_TRUE(eventually([&] { return only_the_index_holds_blocks(engine); }));
}

}  // namespace
}  // namespace keel::engine
