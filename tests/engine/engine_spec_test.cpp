// Speculative decoding through the engine with a real model (stories260K): greedy speculative
// output equals autoregressive output (and llama.cpp's reference) for the reference prompts and a
// repetitive one, batched with requests that do not speculate, with and without schedule-ahead;
// seeded sampling gives the same tokens with and without speculation; drafts are accepted and
// rejected along the way, and every KV block is back in the pool at the end (rollback leaks none).
// All of it for every drafter: n-gram prompt lookup, the committed stories260K draft head, and
// draft models (stories260K itself and a Q8_0 copy of it); draft-head requests on an engine
// without a head, bad head files, draft-model requests on an engine without a draft model and
// draft models of another vocabulary are refused.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "../draft/quantized_copy.h"
#include "engine_test_util.h"
#include "model/random_model.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

constexpr SpeculativeParams kNgram{SpecMethod::kNgram, 4, 3, 1};
constexpr SpeculativeParams kHead{SpecMethod::kDraftHead, 4, 3, 1};
constexpr SpeculativeParams kModel{SpecMethod::kDraftModel, 4, 3, 1};

// A drafter under test: its method and, for draft-model speculation, the draft model's file.
struct Drafter {
  std::string name;
  SpeculativeParams spec;
  std::string draft_model;  // a path, or "q8_0" for a Q8_0 copy of stories260K written here
  // Greedy drafts that are always accepted (stories260K drafting for itself): then the test
  // checks that nearly all are, which fails when the draft's KV falls out of step.
  bool self_draft = false;
};

// stories260K as a Q8_0 copy, written once per test binary.
std::string q8_0_stories() {
  static const std::string path = [] {
    const std::string p = testing::make_temp_dir("engine_spec_q8") + "/stories260K-q8_0.gguf";
    EXPECT_TRUE(
        testing::write_q8_0_copy(testing::shared_path("models/stories260K/stories260K.gguf"), p)
            .ok());
    return p;
  }();
  return path;
}

// The base configuration with the drafter (the committed draft head for the draft-head method,
// the draft model's file for the draft-model method).
EngineConfig spec_config(const Drafter& d) {
  EngineConfig c = base_config();
  c.speculative = d.spec;
  if (d.spec.method == SpecMethod::kDraftHead) c.draft_head_path = KEEL_REPO_DRAFT_HEAD;
  if (d.spec.method == SpecMethod::kDraftModel) {
    c.draft_model_path = d.draft_model == "q8_0" ? q8_0_stories() : d.draft_model;
  }
  return c;
}

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

class EngineSpecMethodTest : public ::testing::TestWithParam<Drafter> {};

TEST_P(EngineSpecMethodTest, GreedySpeculationEqualsAutoregressiveDecoding) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  const std::vector<Tokens> ps = prompts();
  auto plain = Engine::start(*model, base_config());
  ASSERT_TRUE(plain.ok());
  std::vector<Tokens> expected;
  for (const Tokens& p : ps) expected.push_back(run_one(**plain, greedy(p, 48)));
  for (bool ahead : {true, false}) {
    EngineConfig c = spec_config(GetParam());
    c.schedule_ahead = ahead;
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
    if (GetParam().self_draft) {  // the model's own greedy drafts: (nearly) all accepted
      EXPECT_GE(s.spec_accepted_tokens * 100, s.spec_drafted_tokens * 95);
    } else {
      EXPECT_LT(s.spec_accepted_tokens, s.spec_drafted_tokens);  // some drafts were rejected
    }
    EXPECT_EQ(s.spec_emitted_tokens, s.spec_verify_steps + s.spec_accepted_tokens);
    EXPECT_TRUE(eventually([&] { return (*e)->stats().kv_blocks_used == 0; }));
  }
}

TEST_P(EngineSpecMethodTest, GreedyMatchesTheLlamaCppReference) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, spec_config(GetParam()));
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
TEST_P(EngineSpecMethodTest, SeededSamplingGivesTheSameTokens) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto plain = Engine::start(*model, base_config());
  auto spec = Engine::start(*model, spec_config(GetParam()));
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

// Draft models: stories260K drafting for itself (an upper bound: every greedy draft is right)
// and a Q8_0 copy of it (agrees often, not always).
INSTANTIATE_TEST_SUITE_P(
    Drafters, EngineSpecMethodTest,
    ::testing::Values(Drafter{"Ngram", kNgram, ""}, Drafter{"DraftHead", kHead, ""},
                      Drafter{"DraftModelSelf", kModel,
                              testing::shared_path("models/stories260K/stories260K.gguf"), true},
                      Drafter{"DraftModelQ8", kModel, "q8_0"}),
    [](const ::testing::TestParamInfo<Drafter>& info) { return info.param.name; });

// The draft head runs only for requests that ask: an engine with a head serves plain and n-gram
// requests as before, side by side with draft-head ones.
TEST(EngineSpecTest, DraftHeadRequestsMixWithOthers) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto plain = Engine::start(*model, base_config());
  EngineConfig c = base_config();
  c.draft_head_path = KEEL_REPO_DRAFT_HEAD;  // loaded, not the default method
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(plain.ok() && e.ok());
  const std::vector<Tokens> ps = prompts();
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest r = greedy(ps[i], 40);
    if (i % 3 == 1) r.speculative = kHead;
    if (i % 3 == 2) r.speculative = kNgram;
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE((*e)->submit(std::move(r), sinks.back()).ok());
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(sinks[i]->wait(), run_one(**plain, greedy(ps[i], 40))) << "prompt " << i;
  }
  EXPECT_GT((*e)->stats().spec_accepted_tokens, 0);
}

TEST(EngineSpecTest, DraftHeadWithoutAHeadIsRefused) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, base_config());  // shared data holds no head beside the model
  ASSERT_TRUE(e.ok());
  GenerationRequest r = greedy({1, 2, 3}, 4);
  r.speculative = kHead;
  auto key = (*e)->submit(r, std::make_shared<CollectingSink>());
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error().message().find("draft head"), std::string::npos) << key.error().message();
  EngineConfig c = base_config();
  c.speculative = kHead;
  auto no_head = Engine::start(*model, c);
  ASSERT_FALSE(no_head.ok());
  EXPECT_NE(no_head.error().message().find("draft-head"), std::string::npos);
  // A file that is not a draft head: the start fails naming it.
  c.draft_head_path = testing::shared_path("models/stories260K/stories260K.gguf");
  auto wrong = Engine::start(*model, c);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("not a keel draft head"), std::string::npos)
      << wrong.error().message();
}

// Draft-model requests side by side with plain, n-gram and draft-head ones, all at once, on an
// engine whose own KV pool is small enough that requests are preempted and recomputed: the draft
// model's KV (a pool of its own) follows each sequence through it all, and every output equals
// plain decoding.
TEST(EngineSpecTest, DraftModelRequestsMixWithOthersUnderPreemption) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto plain = Engine::start(*model, base_config());
  EngineConfig c = base_config();
  c.draft_head_path = KEEL_REPO_DRAFT_HEAD;
  c.draft_model_path = q8_0_stories();          // loaded, not the default method
  c.kv_cache_bytes = 12 * 5 * 2 * 16 * 32 * 4;  // 12 blocks (stories260K: 5 layers, kv_dim 32)
  auto e = Engine::start(*model, c);
  ASSERT_TRUE(plain.ok() && e.ok()) << e.status().to_string();
  std::vector<Tokens> ps = prompts();
  const std::vector<Tokens> more = prompts();
  ps.insert(ps.end(), more.begin(), more.end());
  std::vector<std::shared_ptr<CollectingSink>> sinks;
  for (size_t i = 0; i < ps.size(); ++i) {
    GenerationRequest r = greedy(ps[i], 40);
    if (i % 4 != 0) r.speculative = kModel;
    if (i % 4 == 2) r.speculative = kHead;
    if (i % 8 == 4) r.speculative = kNgram;
    sinks.push_back(std::make_shared<CollectingSink>());
    ASSERT_TRUE((*e)->submit(std::move(r), sinks.back()).ok());
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(sinks[i]->wait(), run_one(**plain, greedy(ps[i], 40))) << "prompt " << i;
  }
  const EngineStats s = (*e)->stats();
  EXPECT_GT(s.num_preemptions_total, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_TRUE(eventually([&] { return (*e)->stats().kv_blocks_used == 0; }));
}

TEST(EngineSpecTest, DraftModelWithoutAModelOrWithAnotherVocabularyIsRefused) {
  KEEL_REQUIRE_SHARED();
  auto model = load_stories();
  ASSERT_NE(model, nullptr);
  auto e = Engine::start(*model, base_config());
  ASSERT_TRUE(e.ok());
  GenerationRequest r = greedy({1, 2, 3}, 4);
  r.speculative = kModel;
  auto key = (*e)->submit(r, std::make_shared<CollectingSink>());
  ASSERT_FALSE(key.ok());
  EXPECT_NE(key.error().message().find("no draft model"), std::string::npos)
      << key.error().message();
  EngineConfig c = base_config();
  c.speculative = kModel;
  auto none = Engine::start(*model, c);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message().find("--speculative draft-model"), std::string::npos);
  // A model with a vocabulary of its own (generated bytes, 512 tokens like stories260K's).
  model::RandomModelSpec spec;
  spec.shape =
      model::ModelShape{"byte-vocab", 64, 1, 4, 2, 128, 512, 256, 1e4f, 1e-5f, false, false};
  const std::string other = testing::make_temp_dir("engine_spec_vocab") + "/bytes.gguf";
  ThreadPool pool(1);
  ASSERT_TRUE(model::write_random_model(spec, other, pool).ok());
  c.draft_model_path = other;
  auto wrong = Engine::start(*model, c);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.error().message().find("draft model " + other +
                                         ": its vocabulary differs from the target's"),
            std::string::npos)
      << wrong.error().message();
  // Not a model at all.
  c.draft_model_path = KEEL_REPO_DRAFT_HEAD;
  EXPECT_FALSE(Engine::start(*model, c).ok());
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
