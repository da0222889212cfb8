// A stage-0 engine (layers [0, k)) with an in-process stage 1 (LocalStage over a StageRunner)
// against the whole-model engine on stories260K: greedy outputs equal for several prompts,
// submitted together (one batch mixes prefills and decodes) and again (prefix-cache hits, so
// stage 1 reads K/V that an earlier request wrote under the same block ids). Also the refusals:
// a config (speculative, KV tier) fails the start, a request (LoRA, sparse, early exit) fails at
// submit, and a stage runner refuses a block copy outside its pool.
#include <gtest/gtest.h>

#include "../engine/engine_test_util.h"
#include "engine/pipeline_checks.h"
#include "pipeline/stage_runner.h"

namespace keel::engine {
namespace {

std::vector<std::vector<int32_t>> prompts() {
  return {{1, 403, 407, 261, 378},
          {1, 12, 300, 41, 7, 88, 140, 66, 31, 250, 33, 8, 61, 77, 5, 300, 120, 45, 19},
          {1, 90, 17},
          {1, 403, 407, 261, 378, 44, 51}};
}

// Every prompt submitted at once; the generated tokens in prompt order.
std::vector<std::vector<int32_t>> run_all(Engine& e, int32_t max_tokens) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const auto& p : prompts()) {
    sinks.push_back(std::make_shared<CollectingSink>());
    auto key = e.submit(greedy(p, max_tokens), sinks.back());
    EXPECT_TRUE(key.ok()) << key.error().to_string();
  }
  std::vector<std::vector<int32_t>> out;
  for (auto& s : sinks) out.push_back(s->wait());
  return out;
}

std::unique_ptr<pipeline::LocalStage> local_stage(const model::Model& m, const EngineConfig& c,
                                                  int64_t split) {
  pipeline::StageSpec spec;
  spec.first_layer = split;
  spec.num_blocks = 4096;  // ≥ the engine's pool (ids beyond it are never used)
  spec.block_size = c.block_size;
  spec.kv_dtype = c.kv_dtype;
  spec.max_batch_tokens = c.scheduler.max_batched_tokens;
  auto runner = pipeline::StageRunner::create(m, spec, c.isa, 1);
  EXPECT_TRUE(runner.ok()) << runner.status().to_string();
  return std::make_unique<pipeline::LocalStage>(std::move(*runner));
}

TEST(PipelineEngineTest, LocalStageGivesTheWholeModelsGreedyOutputs) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = base_config();
  std::vector<std::vector<int32_t>> want;
  {
    auto e = Engine::start(*model, c);
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    want = run_all(**e, 24);
  }
  for (int64_t split : {int64_t{1}, int64_t{3}}) {
    auto stage = local_stage(*model, c, split);
    EngineDeps deps;
    deps.pipeline_tail = stage.get();
    auto e = Engine::start(*model, c, std::move(deps));
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    EXPECT_EQ(run_all(**e, 24), want) << "split " << split;
    EXPECT_EQ(run_all(**e, 24), want) << "split " << split << ", prefix-cache hits";
    // A stage-0 engine holds only its layers' K/V.
    EXPECT_EQ((*e)->kv_block_bytes(), static_cast<size_t>(split) * 2 * 16 * 32 * 4);
  }
}

TEST(PipelineEngineTest, RefusesWhatNeedsEveryLayerInOneProcess) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = base_config();
  auto stage = local_stage(*model, c, 2);
  {
    EngineConfig spec = c;
    spec.speculative.method = SpecMethod::kNgram;
    EngineDeps deps;
    deps.pipeline_tail = stage.get();
    auto e = Engine::start(*model, spec, std::move(deps));
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message().find("--pp"), std::string::npos) << e.error().message();
  }
  {
    EngineConfig tier = c;
    tier.kv_host_bytes = 1 << 20;
    EngineDeps deps;
    deps.pipeline_tail = stage.get();
    EXPECT_FALSE(Engine::start(*model, tier, std::move(deps)).ok());
  }
  EngineDeps deps;
  deps.pipeline_tail = stage.get();
  auto e = Engine::start(*model, c, std::move(deps));
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  GenerationRequest lora = greedy({1, 2, 3}, 4);
  lora.lora = "any";
  EXPECT_EQ((*e)->submit(lora, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
  GenerationRequest sparse = greedy({1, 2, 3}, 4);
  sparse.sparse = SparseParams{"streaming", 64};
  EXPECT_EQ((*e)->submit(sparse, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
  GenerationRequest ee = greedy({1, 2, 3}, 4);
  ee.early_exit = EarlyExitParams{};
  ee.early_exit->enabled = true;
  EXPECT_EQ((*e)->submit(ee, std::make_shared<CollectingSink>()).error().code(),
            StatusCode::kInvalidArgument);
  std::vector<std::byte> block((*e)->kv_block_bytes());
  EXPECT_EQ((*e)->kv_connector().read_block(kv::BlockHash{1, 2}, block).code(),
            StatusCode::kUnsupported);
  // The plain request still runs.
  EXPECT_EQ(run_one(**e, greedy({1, 403, 407}, 4)).size(), 4u);
}

TEST(PipelineEngineTest, StageRunnerRefusesCopiesOutsideItsPool) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  pipeline::StageSpec spec;
  spec.first_layer = 2;
  spec.num_blocks = 4;
  auto runner = pipeline::StageRunner::create(*model, spec, base_config().isa, 1);
  ASSERT_TRUE(runner.ok());
  model::Batch empty;
  std::vector<float> logits;
  const std::vector<BlockCopy> bad = {{0, 4}};
  EXPECT_EQ((*runner)->run(bad, empty, {}, &logits).code(), StatusCode::kInvalidArgument);
  const std::vector<BlockCopy> good = {{0, 3}};
  EXPECT_TRUE((*runner)->run(good, empty, {}, &logits).ok());
  spec.first_layer = 0;
  EXPECT_FALSE(pipeline::StageRunner::create(*model, spec, base_config().isa, 1).ok());
}

}  // namespace
}  // namespace keel::engine
