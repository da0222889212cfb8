// Sparse decode through the engine with a real model (stories260K): a budget covering the whole
// context gives dense's greedy tokens under every policy (the page-list path is exact); RaaS at a
// small budget gives pages back, so the request never holds more than its prefill pages +
// L/page + 1 decode pages while dense grows with the output, and kv usage shows it; generated
// (approximate) positions are never published in the prefix cache; preemption with sparse
// requests recomputes and finishes; bad parameters are refused at submit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 8;

std::vector<int32_t> prompt20() {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < 20; ++i) p.push_back(300 + 7 * i % 150);
  return p;
}

EngineConfig sparse_config(bool ahead) {
  EngineConfig c = base_config();
  c.block_size = kBlock;
  c.schedule_ahead = ahead;
  c.scheduler.max_num_seqs = 2;
  return c;
}

GenerationRequest sparse_request(std::string policy, int32_t budget, int32_t max_tokens) {
  GenerationRequest r = greedy(prompt20(), max_tokens);
  r.sparse = SparseParams{std::move(policy), budget};
  return r;
}

// Records the largest KV usage the engine published while the request ran.
class UsageSink final : public OutputSink {
 public:
  UsageSink(Engine* e, std::shared_ptr<CollectingSink> inner) : e_(e), inner_(std::move(inner)) {}
  void on_event(TokenEvent ev) override {
    max_usage = std::max(max_usage.load(), e_->stats().kv_usage);
    inner_->on_event(std::move(ev));
  }
  std::atomic<float> max_usage{0.0f};

 private:
  Engine* e_;
  std::shared_ptr<CollectingSink> inner_;
};

class EngineSparseTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
  }
  std::unique_ptr<Engine> start(EngineConfig c) {
    auto e = Engine::start(*model_, std::move(c));
    EXPECT_TRUE(e.ok()) << e.error().to_string();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  std::unique_ptr<model::Model> model_;
};

TEST_P(EngineSparseTest, WholeContextBudgetGivesDenseTokens) {
  EngineConfig c = sparse_config(GetParam());
  c.sparse_tuning.window_tokens = 512;
  c.sparse_tuning.sink_tokens = 4;
  auto e = start(c);
  ASSERT_NE(e, nullptr);
  const std::vector<int32_t> dense = run_one(*e, greedy(prompt20(), 120));
  ASSERT_EQ(dense.size(), 120u);
  for (const char* policy : {"dense", "streaming", "h2o", "quest", "raas"}) {
    EXPECT_EQ(run_one(*e, sparse_request(policy, 512, 120)), dense) << policy;
  }
  EXPECT_TRUE(eventually([&] { return e->stats().sparse_requests == 4; }));  // dense is not
  EXPECT_EQ(e->stats().sparse_pages_released, 0);
}

TEST_P(EngineSparseTest, RaasHoldsItsPrefillPagesPlusTheBudget) {
  auto e = start(sparse_config(GetParam()));
  ASSERT_NE(e, nullptr);
  const int32_t n = 400, budget = 32;
  const float blocks = static_cast<float>(e->num_kv_blocks());
  // Dense: one page per 8 tokens, 53 at the end.
  auto dense_inner = std::make_shared<CollectingSink>();
  auto dense_sink = std::make_shared<UsageSink>(e.get(), dense_inner);
  ASSERT_TRUE(e->submit(greedy(prompt20(), n), dense_sink).ok());
  ASSERT_EQ(dense_inner->wait().size(), static_cast<size_t>(n));
  EXPECT_GE(dense_sink->max_usage.load() * blocks, 50.0f);
  // RaaS at L = 32: prefill pages 0..2 (page 2 holds the prompt's last positions) + 4 + 1.
  auto inner = std::make_shared<CollectingSink>();
  auto sink = std::make_shared<UsageSink>(e.get(), inner);
  ASSERT_TRUE(e->submit(sparse_request("raas", budget, n), sink).ok());
  const std::vector<int32_t> out = inner->wait();
  EXPECT_EQ(out.size(), static_cast<size_t>(n));
  const int32_t bound = 3 + budget / kBlock + 1;
  ASSERT_TRUE(eventually([&] { return e->stats().sparse_requests == 1; }));
  const EngineStats s = e->stats();
  EXPECT_LE(s.sparse_max_pages_held, bound);
  EXPECT_GE(s.sparse_max_pages_held, bound - 1);  // the budget really fills
  EXPECT_GE(s.sparse_pages_released, 53 - bound);
  EXPECT_LE(sink->max_usage.load() * blocks, static_cast<float>(bound) + 0.5f);
  EXPECT_TRUE(eventually([&] { return e->stats().kv_usage == 0.0f; }));
}

TEST_P(EngineSparseTest, GeneratedPositionsAreNotPublished) {
  auto e = start(sparse_config(GetParam()));
  ASSERT_NE(e, nullptr);
  std::vector<int32_t> full = prompt20();
  for (int32_t t : run_one(*e, sparse_request("quest", 16, 60))) full.push_back(t);
  auto sink = std::make_shared<CollectingSink>();
  ASSERT_TRUE(e->submit(greedy(full, 1), sink).ok());
  sink->wait();
  EXPECT_EQ(sink->cached(), 16);  // the prompt's whole pages only
}

TEST_P(EngineSparseTest, PreemptedSparseRequestsFinish) {
  EngineConfig c = sparse_config(GetParam());
  c.kv_cache_bytes = 14 * 5 * 2 * kBlock * 32 * 4;  // 14 blocks of 8: two requests do not fit
  auto e = start(c);
  ASSERT_NE(e, nullptr);
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const char* policy : {"quest", "raas"}) {
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE(e->submit(sparse_request(policy, 16, 80), sinks.back()).ok());
  }
  for (auto& s : sinks) {
    EXPECT_EQ(s->wait().size(), 80u);
    EXPECT_EQ(s->finish(), FinishReason::kLength);
  }
  EXPECT_GT(e->stats().num_preemptions_total, 0);
  EXPECT_TRUE(eventually([&] { return e->stats().kv_usage == 0.0f; }));
}

TEST_P(EngineSparseTest, BadParametersAreRefused) {
  auto e = start(sparse_config(GetParam()));
  ASSERT_NE(e, nullptr);
  auto sink = std::make_shared<CollectingSink>();
  EXPECT_EQ(e->submit(sparse_request("lru", 64, 4), sink).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(e->submit(sparse_request("raas", 4, 4), sink).status().code(),
            StatusCode::kInvalidArgument);  // below one page
  EngineConfig bad = sparse_config(GetParam());
  bad.sparse = SparseParams{"quest", 4};
  EXPECT_FALSE(bad.validate().ok());
  bad.sparse = SparseParams{"nope", 64};
  EXPECT_FALSE(bad.validate().ok());
}

INSTANTIATE_TEST_SUITE_P(ScheduleAhead, EngineSparseTest, ::testing::Bool());

}  // namespace
}  // namespace keel::engine
