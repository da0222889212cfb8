// SpecEE early exit through the engine with a real model (stories260K, its committed draft head
// and exit predictors): a threshold that never fires gives exactly the full-depth greedy tokens
// (batched with requests that do not exit, with draft-head speculation too); forced exits at a
// fixed layer run fewer layers (keel:early_exit_layers), are deterministic and give every KV block
// back; with draft-head speculation the verification rows run the predictors too (every emitted
// token is in the histogram), give plain speculation's tokens when nothing fires, and exit early
// when forced, deterministically; early-exit requests on an engine without predictors are
// refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

EngineConfig exit_config() {
  EngineConfig c = base_config();
  c.draft_head_path = KEEL_REPO_DRAFT_HEAD;
  c.exit_predictors_path = KEEL_REPO_EXIT_PREDICTORS;
  return c;
}

std::vector<Tokens> prompts() { return {{1, 50, 60, 70}, {1, 300, 301, 302, 303}, {1, 9}}; }

GenerationRequest with_exit(Tokens p, float threshold, std::vector<int32_t> layers = {}) {
  GenerationRequest r = greedy(std::move(p), 40);
  r.early_exit = EarlyExitParams{true, threshold, std::move(layers)};
  return r;
}

// Every prompt at once; the odd ones without early exit.
std::vector<Tokens> run_batch(Engine& e, const std::vector<GenerationRequest>& rs) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (const GenerationRequest& r : rs) {
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(e.submit(r, sinks.back()).ok());
  }
  std::vector<Tokens> out;
  for (auto& s : sinks) out.push_back(s->wait());
  return out;
}

TEST(EngineEarlyExitTest, NeverExitingGivesTheFullDepthTokens) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto plain = Engine::start(*model, base_config());
  auto e = Engine::start(*model, exit_config());
  ASSERT_TRUE(plain.ok() && e.ok()) << (e.ok() ? "" : e.error().to_string());
  std::vector<Tokens> expected;
  std::vector<GenerationRequest> rs;
  for (const Tokens& p : prompts()) {
    expected.push_back(run_one(**plain, greedy(p, 40)));
    rs.push_back(with_exit(p, 2.0f));  // P(exit) ≤ 1 < 2: no predictor fires
  }
  rs[1].early_exit.reset();
  EXPECT_EQ(run_batch(**e, rs), expected);
  GenerationRequest spec = with_exit(prompts()[0], 2.0f);
  spec.speculative = SpeculativeParams{SpecMethod::kDraftHead, 4, 3, 1};
  EXPECT_EQ(run_one(**e, spec), expected[0]);
  const MetricsSnapshot m = (*e)->metrics();
  const auto n_layer = static_cast<double>(model->hparams().n_layer);
  EXPECT_GT(m.early_exit_layers.count, 0u);
  EXPECT_DOUBLE_EQ(m.early_exit_layers.sum,
                   n_layer * static_cast<double>(m.early_exit_layers.count));
}

TEST(EngineEarlyExitTest, ForcedExitsRunFewerLayersDeterministically) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  std::vector<Tokens> first;
  for (int run = 0; run < 2; ++run) {
    auto e = Engine::start(*model, exit_config());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    std::vector<GenerationRequest> rs;
    for (const Tokens& p : prompts()) rs.push_back(with_exit(p, -1.0f, {1}));
    const std::vector<Tokens> got = run_batch(**e, rs);
    for (const Tokens& t : got) EXPECT_EQ(t.size(), 40u);
    if (run == 0) first = got;
    EXPECT_EQ(got, first);
    EXPECT_EQ(run_one(**e, rs[0]), got[0]);  // alone as in a batch
    const MetricsSnapshot m = (*e)->metrics();
    const auto n_layer = static_cast<double>(model->hparams().n_layer);
    ASSERT_GT(m.early_exit_layers.count, 0u);
    // Some tokens stopped after layer 1 (2 layers run), none ran more than all of them.
    EXPECT_LT(m.early_exit_layers.sum, n_layer * static_cast<double>(m.early_exit_layers.count));
    EXPECT_GT(m.early_exit_layers.cumulative[1], 0u);  // bucket "≤ 2 layers"
    EXPECT_TRUE(eventually([&] { return (*e)->stats().kv_blocks_used == 0; }));
  }
}

GenerationRequest speculating(GenerationRequest r) {
  r.speculative = SpeculativeParams{SpecMethod::kDraftHead, 4, 3, 1};
  return r;
}

TEST(EngineEarlyExitTest, VerificationRowsNeverExitingGivePlainSpeculation) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, exit_config());
  ASSERT_TRUE(e.ok()) << e.error().to_string();
  const auto n_layer = static_cast<double>(model->hparams().n_layer);
  for (const Tokens& p : prompts()) {
    const Tokens plain = run_one(**e, speculating(greedy(p, 40)));
    const uint64_t before = (*e)->metrics().early_exit_layers.count;
    EXPECT_EQ(run_one(**e, speculating(with_exit(p, 2.0f))), plain);
    const MetricsSnapshot m = (*e)->metrics();
    // Every token after the prefill's came from a row that ran the predictors (verification rows
    // included; before, only steps without drafts did).
    EXPECT_GE(m.early_exit_layers.count - before, 39u);
    EXPECT_DOUBLE_EQ(m.early_exit_layers.sum,
                     n_layer * static_cast<double>(m.early_exit_layers.count));
  }
  EXPECT_GT((*e)->stats().spec_accepted_tokens, 0);
}

TEST(EngineEarlyExitTest, VerificationRowsExitWhenForced) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const auto n_layer = static_cast<int32_t>(model->hparams().n_layer);
  std::vector<Tokens> first;
  for (int run = 0; run < 2; ++run) {
    auto e = Engine::start(*model, exit_config());
    ASSERT_TRUE(e.ok()) << e.error().to_string();
    std::vector<GenerationRequest> rs;
    for (const Tokens& p : prompts()) rs.push_back(speculating(with_exit(p, -1.0f, {1})));
    const std::vector<Tokens> got = run_batch(**e, rs);
    for (const Tokens& t : got) {
      EXPECT_EQ(t.size(), 40u);
      for (int32_t id : t) EXPECT_TRUE(id >= 0 && id < model->hparams().n_vocab) << id;
    }
    if (run == 0) first = got;
    EXPECT_EQ(got, first);
    const MetricsSnapshot m = (*e)->metrics();
    const EngineStats st = (*e)->stats();
    ASSERT_GT(st.spec_verify_steps, 0);
    // Every token after each prefill's was observed (39 of 40 per request), verification rows'
    // included.
    EXPECT_GE(m.early_exit_layers.count, 3u * 39u);
    // Tokens emitted by steps without drafts are count − emitted by verifications; more rows than
    // those stopped after layer 1, so verification rows exited.
    const auto from_decodes =
        static_cast<int64_t>(m.early_exit_layers.count) - st.spec_emitted_tokens;
    EXPECT_GT(static_cast<int64_t>(m.early_exit_layers.cumulative[1]),
              std::max<int64_t>(0, from_decodes));
    EXPECT_LT(m.early_exit_layers.sum, n_layer * static_cast<double>(m.early_exit_layers.count));
    EXPECT_TRUE(eventually([&] { return (*e)->stats().kv_blocks_used == 0; }));
  }
}

TEST(EngineEarlyExitTest, RefusedWithoutPredictors) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = base_config();
  c.exit_predictors_path = "";
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok());
  auto sink = std::make_shared<CollectingSink>();
  auto key = (*e)->submit(with_exit({1, 5}, 0.5f), sink);
  if (!key.ok()) {
    EXPECT_EQ(key.error().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(key.error().message().find("early_exit"), std::string::npos);
  } else {
    ADD_FAILURE() << "an early-exit request was accepted without predictors beside "
                  << model->file().path();
  }
  c.early_exit.enabled = true;
  c.exit_predictors_path = "/nonexistent/m.exit.gguf";
  EXPECT_FALSE(Engine::start(*model, c).ok());
}

}  // namespace
}  // namespace keel::engine
