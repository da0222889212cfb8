// Speculative decoding through the engine with a real model (stories260K): greedy speculative
// output equals autoregressive output (and llama.cpp's reference) for the reference prompts and a
// repetitive one, batched with requests that do not speculate, with and without schedule-ahead;
// seeded sampling gives the same tokens with and without speculation; drafts are accepted and
// rejected along the way, and every KV block is back in the pool at the end (rollback leaks none).
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine_test_util.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

constexpr SpeculativeParams kNgram{SpecMethod::kNgram, 4, 3, 1};

// The reference prompts, a repetitive one and a short one.
std::vector<Tokens> prompts() {
  const auto ref = nlohmann::json::parse(
      testing::read_file(testing::shared_path("models/stories260K/reference/greedy.json")));
  std::vector<Tokens> out;
  for (const auto& r : ref["results"]) out.push_back(r["prompt_ids"].get<Tokens>());
  Tokens repetitive = {1};
  for (int i = 0; i < 6; ++i) repetitive.insert(repetitive.end(), {300, 301, 302, 303, 304});
  out.push_back(repetitive);
  out.push_back({1, 50});
  return out;
}

// Every prompt at once on `e`; the odd ones speculate (`spec`), the even ones say "none".
std::vector<Tokens> run_batch(Engine& e, const std::vector<Tokens>& ps,
                              const GenerationRequest& base, bool all_speculate) {
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest r = base;
    r.prompt_tokens = ps[i];
    if (!all_speculate && i % 2 == 0) r.speculative = SpeculativeParams{};  // method none
    sinks.push_back(std::make_shared<CollectingSink>());
    EXPECT_TRUE(e.submit(std::move(r), sinks.back()).ok());
  }
  std::vector<Tokens> out;
  for (auto& s : sinks) out.push_back(s->wait());
  return out;
}

TEST(EngineSpecTest, GreedySpeculationEqualsAutoregressiveDecoding) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const std::vector<Tokens> ps = prompts();
  auto plain = Engine::start(*model, base_config());
  ASSERT_TRUE(plain.ok());
  std::vector<Tokens> expected;
  for (const Tokens& p : ps) expected.push_back(run_one(**plain, greedy(p, 48)));
  for (bool ahead : {true, false}) {
    EngineConfig c = base_config();
    c.schedule_ahead = ahead;
    c.speculative = kNgram;
    c.scheduler.max_batched_tokens = 64;  // drafts compete with prefill chunks for the budget
    auto e = Engine::start(*model, c);
    ASSERT_TRUE(e.ok());
    for (bool all : {true, false}) {
      const std::vector<Tokens> got = run_batch(**e, ps, greedy({}, 48), all);
      for (size_t i = 0; i < ps.size(); ++i) {
        EXPECT_EQ(got[i], expected[i])
            << "prompt " << i << (ahead ? ", ahead" : "") << (all ? ", all speculate" : ", mixed");
      }
    }
    // One at a time, and with a request that ends on EOS inside a verified run.
    for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(run_one(**e, greedy(ps[i], 48)), expected[i]);
    const EngineStats s = (*e)->stats();
    EXPECT_GT(s.spec_verify_steps, 0);
    EXPECT_GT(s.spec_accepted_tokens, 0);
    EXPECT_LT(s.spec_accepted_tokens, s.spec_drafted_tokens);  // some drafts were rejected
    EXPECT_EQ(s.spec_emitted_tokens, s.spec_verify_steps + s.spec_accepted_tokens);
    EXPECT_TRUE(eventually([&] { return (*e)->stats().kv_blocks_used == 0; }));
  }
}

TEST(EngineSpecTest, GreedyMatchesTheLlamaCppReference) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  EngineConfig c = base_config();
  c.speculative = kNgram;
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(e.ok());
  const auto ref = nlohmann::json::parse(
      testing::read_file(testing::shared_path("models/stories260K/reference/greedy.json")));
  for (const auto& r : ref["results"]) {
    EXPECT_EQ(run_one(**e, greedy(r["prompt_ids"].get<Tokens>(), 64)), r["gen_ids"].get<Tokens>())
        << r["prompt"];
  }
  EXPECT_GT((*e)->stats().spec_accepted_tokens, 0);
}

// The verification samples each position with the request's own draw (sampling/draft_verify.h),
// so a seeded request gives the very tokens it gives without speculation.
TEST(EngineSpecTest, SeededSamplingGivesTheSameTokens) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto plain = Engine::start(*model, base_config());
  EngineConfig c = base_config();
  c.speculative = kNgram;
  auto spec = Engine::start(*model, c);
  ASSERT_TRUE(plain.ok() && spec.ok());
  const std::vector<Tokens> ps = prompts();
  for (uint64_t seed = 0; seed < 12; ++seed) {
    GenerationRequest r = greedy(ps[seed % ps.size()], 32);
    r.sampling.temperature = 0.8f;
    r.sampling.top_k = 40;
    r.sampling.repetition_penalty = 1.1f;
    r.sampling.seed = seed;
    EXPECT_EQ(run_one(**spec, r), run_one(**plain, r)) << "seed " << seed;
  }
  EXPECT_GT((*spec)->stats().spec_verify_steps, 0);
}

TEST(EngineSpecTest, BadSpeculativeParamsAreRefused) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, base_config());
  ASSERT_TRUE(e.ok());
  GenerationRequest r = greedy({1, 2, 3}, 4);
  r.speculative = SpeculativeParams{SpecMethod::kNgram, 0, 3, 1};
  auto key = (*e)->submit(r, std::make_shared<CollectingSink>());
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error().message().find("speculative.k"), std::string::npos);
  EngineConfig c = base_config();
  c.speculative = SpeculativeParams{SpecMethod::kNgram, 17, 3, 1};
  EXPECT_FALSE(Engine::start(*model, c).ok());
}

}  // namespace
}  // namespace keel::engine
