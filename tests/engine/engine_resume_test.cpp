// Resumed requests (GenerationRequest::resumed_tokens) with a real model (stories260K): a request
// re-driven as prompt + its first k generated tokens continues exactly as the uninterrupted run —
// the same tokens k.., the same finish reason and stop string, usage of the original prompt — for
// greedy decoding, seeded sampling at temperature 1, and penalties with a stop string, at several
// cut points, with the resumed tokens' KV prefilled (no prefix cache, one or several chunks) or
// taken from the prefix cache. Plus the validation of resumed_tokens, and — on random-weight
// models of every matmul weight type, under every kernel table this CPU has, with an F32 and an
// F16 KV cache — that the resumed run's logits (raw logprobs) equal the uninterrupted run's
// bit for bit: prefill of the resumed tokens computes the same KV as decoding them did.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "engine/engine.h"
#include "engine_test_util.h"
#include "model/random_model.h"
#include "tokenizer/incremental_decoder.h"
#include "tokenizer/tokenizer.h"

namespace keel::engine {
namespace {

// What a client sees of one request.
struct Outcome {
  std::vector<int32_t> tokens;
  std::vector<sampling::Logprobs> logprobs;  // when the request asks for them
  std::optional<FinishReason> finish;
  std::optional<int32_t> stop_string;
  int32_t num_prompt_tokens = -1;  // of the final event
  int32_t num_cached_tokens = -1;
  bool usage_consistent = true;  // every event reported the same num_prompt_tokens
  friend bool operator==(const Outcome&, const Outcome&) = default;
};

class OutcomeSink final : public OutputSink {
 public:
  void on_event(TokenEvent ev) override {
    std::lock_guard lock(mu_);
    out_.tokens.insert(out_.tokens.end(), ev.tokens.begin(), ev.tokens.end());
    out_.logprobs.insert(out_.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
    if (out_.num_prompt_tokens >= 0 && ev.num_prompt_tokens != out_.num_prompt_tokens) {
      out_.usage_consistent = false;
    }
    out_.num_prompt_tokens = ev.num_prompt_tokens;
    out_.num_cached_tokens = ev.num_cached_tokens;
    if (ev.finish) {
      out_.finish = ev.finish;
      out_.stop_string = ev.stop_string;
      cv_.notify_all();
    }
  }
  Outcome wait() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(60), [this] {
      return out_.finish.has_value();
    })) << "request did not finish";
    return out_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  Outcome out_;
};

Outcome run(Engine& e, GenerationRequest r) {
  auto sink = std::make_shared<OutcomeSink>();
  auto key = e.submit(std::move(r), sink);
  EXPECT_TRUE(key.ok()) << key.error().to_string();
  return key.ok() ? sink->wait() : Outcome{};
}

// The request re-driven after k generated tokens.
GenerationRequest resumed(const GenerationRequest& r, const std::vector<int32_t>& generated,
                          int32_t k) {
  GenerationRequest q = r;
  q.prompt_tokens.insert(q.prompt_tokens.end(), generated.begin(), generated.begin() + k);
  q.resumed_tokens = k;
  return q;
}

const std::vector<int32_t> kPrompt = {1, 403, 407, 261, 378};

class EngineResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    auto tok = tokenizer::Tokenizer::from_gguf(model_->file());
    ASSERT_TRUE(tok.ok()) << tok.error().to_string();
    tok_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
  }
  std::unique_ptr<Engine> start(EngineConfig c = base_config()) {
    auto e = Engine::start(*model_, c, EngineDeps{.tokenizer = tok_.get()});
    EXPECT_TRUE(e.ok()) << e.error().to_string();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  // Runs `r` uninterrupted, then resumed at each cut on a fresh engine per configuration (so
  // the resumed tokens' KV is prefilled, not found in the prefix cache) and on the engine that
  // ran it (prefix-cache hits): every continuation must equal the uninterrupted run's tail.
  void expect_resumes_exactly(const GenerationRequest& r, const char* what) {
    SCOPED_TRACE(what);
    std::unique_ptr<Engine> reference = start();
    ASSERT_NE(reference, nullptr);
    const Outcome whole = run(*reference, r);
    const auto n = static_cast<int32_t>(whole.tokens.size());
    ASSERT_GE(n, 8) << "too short to cut";
    EXPECT_EQ(whole.num_prompt_tokens, static_cast<int32_t>(r.prompt_tokens.size()));
    std::vector<int32_t> cuts = {1, 2, 7, n / 2, n - 1};
    for (const char* config : {"prefix-cache", "no-prefix-cache", "chunked-prefill"}) {
      std::unique_ptr<Engine> engine;
      if (std::string(config) != "prefix-cache") {
        EngineConfig c = base_config();
        c.enable_prefix_cache = false;
        if (std::string(config) == "chunked-prefill") c.scheduler.max_batched_tokens = 16;
        engine = start(c);
        ASSERT_NE(engine, nullptr);
      }
      Engine& e = engine != nullptr ? *engine : *reference;
      for (int32_t k : cuts) {
        SCOPED_TRACE(::testing::Message() << config << ", resumed after " << k << " of " << n);
        Outcome want = whole;
        want.tokens.erase(want.tokens.begin(), want.tokens.begin() + k);
        if (!want.logprobs.empty())
          want.logprobs.erase(want.logprobs.begin(), want.logprobs.begin() + k);
        Outcome got = run(e, resumed(r, whole.tokens, k));
        EXPECT_LE(got.num_cached_tokens, want.num_prompt_tokens);
        got.num_cached_tokens = want.num_cached_tokens;  // depends on the prefix cache
        EXPECT_EQ(got, want);
      }
    }
  }

  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(EngineResumeTest, GreedyContinuesExactly) {
  expect_resumes_exactly(greedy(kPrompt, 48), "greedy");
}

TEST_F(EngineResumeTest, SeededSamplingAtTemperatureOneContinuesExactly) {
  GenerationRequest r = greedy(kPrompt, 48);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 20261201;
  expect_resumes_exactly(r, "temperature 1");
  r.sampling.seed = 7;
  r.sampling.top_k = 40;
  r.sampling.top_p = 0.9f;
  r.ignore_eos = false;  // may end on an end-of-generation token: the same one, resumed
  r.max_tokens = 64;
  expect_resumes_exactly(r, "top-k, top-p, eos");
}

// Penalties count the resumed tokens as output, and a stop string that starts in the resumed
// text and completes in the continuation still finishes the request on the same token.
TEST_F(EngineResumeTest, PenaltiesAndStopStringContinueExactly) {
  GenerationRequest r = greedy(kPrompt, 48);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 99;
  r.sampling.frequency_penalty = 0.8f;
  r.sampling.presence_penalty = 0.3f;
  r.sampling.repetition_penalty = 1.2f;
  std::unique_ptr<Engine> engine = start();
  ASSERT_NE(engine, nullptr);
  const Outcome free_run = run(*engine, r);
  ASSERT_EQ(free_run.tokens.size(), 48u);
  // A stop string across the boundary of tokens `at` and at + 1, around the middle.
  tokenizer::IncrementalDecoder decoder(*tok_, false, tokenizer::DecodePosition::kContinuation);
  std::vector<std::string> pieces;
  for (int32_t t : free_run.tokens) pieces.push_back(decoder.push(t));
  size_t at = 20;
  while (at + 1 < pieces.size() && (pieces[at].size() < 2 || pieces[at + 1].size() < 2)) ++at;
  ASSERT_LT(at + 1, pieces.size());
  const std::string stop = pieces[at].substr(pieces[at].size() - 2) + pieces[at + 1].substr(0, 2);
  r.stop_strings = {"never in this story", stop};
  const Outcome whole = run(*engine, r);
  ASSERT_EQ(whole.finish, FinishReason::kStop);
  ASSERT_EQ(whole.stop_string, 1);
  ASSERT_LE(whole.tokens.size(), at + 2);
  expect_resumes_exactly(r, "penalties + stop string");
  // The cut right inside the stop string: its first half resumed, the next token completes it.
  const auto k = static_cast<int32_t>(whole.tokens.size()) - 1;
  const Outcome across = run(*engine, resumed(r, whole.tokens, k));
  EXPECT_EQ(across.tokens, std::vector<int32_t>{whole.tokens.back()});
  EXPECT_EQ(across.finish, FinishReason::kStop);
  EXPECT_EQ(across.stop_string, 1);
  // Counting the resumed tokens as prompt instead (resumed_tokens = 0) changes the continuation.
  GenerationRequest as_prompt = resumed(r, whole.tokens, 8);
  as_prompt.resumed_tokens = 0;
  as_prompt.max_tokens = r.max_tokens - 8;
  as_prompt.stop_strings.clear();
  Outcome other = run(*engine, as_prompt);
  EXPECT_NE(other.tokens, std::vector<int32_t>(free_run.tokens.begin() + 8, free_run.tokens.end()));
}

TEST_F(EngineResumeTest, MaxTokensCountsTheResumedTokens) {
  std::unique_ptr<Engine> engine = start();
  ASSERT_NE(engine, nullptr);
  const GenerationRequest r = greedy(kPrompt, 12);
  const Outcome whole = run(*engine, r);
  ASSERT_EQ(whole.tokens.size(), 12u);
  const Outcome rest = run(*engine, resumed(r, whole.tokens, 9));
  EXPECT_EQ(rest.tokens, std::vector<int32_t>(whole.tokens.begin() + 9, whole.tokens.end()));
  EXPECT_EQ(rest.finish, FinishReason::kLength);
  EXPECT_EQ(rest.num_prompt_tokens, 5);
  const MetricsSnapshot m = engine->metrics();
  EXPECT_EQ(m.request_prompt_tokens.sum, 10.0);      // both counted the original 5 prompt tokens
  EXPECT_EQ(m.request_generation_tokens.sum, 15.0);  // 12 + the 3 this engine generated
}

TEST_F(EngineResumeTest, InvalidResumedTokensAreRefused) {
  std::unique_ptr<Engine> engine = start();
  ASSERT_NE(engine, nullptr);
  const GenerationRequest r = greedy(kPrompt, 20);
  const Outcome whole = run(*engine, r);
  ASSERT_EQ(whole.tokens.size(), 20u);
  const auto refused = [&](GenerationRequest q, const char* why) {
    auto key = engine->submit(std::move(q), std::make_shared<OutcomeSink>());
    ASSERT_FALSE(key.ok()) << why;
    EXPECT_EQ(key.error().code(), StatusCode::kInvalidArgument) << why;
  };
  GenerationRequest q = resumed(r, whole.tokens, 6);
  q.resumed_tokens = -1;
  refused(q, "negative");
  q.resumed_tokens = static_cast<int32_t>(q.prompt_tokens.size());
  refused(q, "no original prompt left");
  q = resumed(r, whole.tokens, 6);
  q.max_tokens = 6;
  refused(q, "nothing left to generate");
  // A token that would have finished the earlier attempt.
  q = resumed(r, whole.tokens, 6);
  q.stop_token_ids = {whole.tokens[3]};
  refused(q, "stop token id");
  q = resumed(r, whole.tokens, 6);
  q.prompt_tokens[q.prompt_tokens.size() - 2] = 2;  // the model's end-of-generation id
  q.ignore_eos = false;
  refused(q, "end of generation");
  q.ignore_eos = true;  // it would not have finished: accepted
  EXPECT_TRUE(engine->submit(q, std::make_shared<OutcomeSink>()).ok());
  // A stop string completed inside the resumed text: the earlier attempt had finished.
  tokenizer::IncrementalDecoder decoder(*tok_, false, tokenizer::DecodePosition::kContinuation);
  std::string text;
  for (int i = 0; i < 6; ++i) text += decoder.push(whole.tokens[static_cast<size_t>(i)]);
  ASSERT_GE(text.size(), 3u);
  q = resumed(r, whole.tokens, 6);
  q.stop_strings = {text.substr(1, 2)};
  refused(q, "stop string inside");
  // The same request uninterrupted is fine (it stops early); not resumed, nothing is checked.
  q.resumed_tokens = 0;
  EXPECT_TRUE(engine->submit(q, std::make_shared<OutcomeSink>()).ok());
}

// Runs a seeded request uninterrupted and resumed at a few cuts on `model` under every kernel
// table this CPU has, with an F32 and an F16 KV cache, no prefix cache (the resumed tokens are
// prefilled): the same tokens and bit-identical raw logprobs.
void expect_prefill_matches_decode(const model::Model& model, const std::string& what) {
  const CpuFeatures cpu = detect_cpu_features();
  for (kernels::Isa isa : {kernels::Isa::kScalar, kernels::Isa::kAvx2, kernels::Isa::kAvx512}) {
    if (!kernels::isa_supported(isa, cpu)) continue;
    for (DType kv : {DType::kF32, DType::kF16}) {
      SCOPED_TRACE(::testing::Message() << what << " weights, " << kernels::isa_name(isa) << ", "
                                        << dtype_name(kv) << " KV");
      EngineConfig c = base_config();
      c.isa = isa;
      c.kv_dtype = kv;
      c.enable_prefix_cache = false;
      c.kv_cache_bytes = int64_t{8} << 20;
      auto e = Engine::start(model, c);
      ASSERT_TRUE(e.ok()) << e.error().to_string();
      GenerationRequest r = greedy({1, 72, 101, 108, 108, 111, 44, 32, 119}, 24);
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 3;
      r.sampling.logprobs = 4;  // raw logprobs: they change with any logit
      const Outcome whole = run(**e, r);
      ASSERT_EQ(whole.logprobs.size(), 24u);
      for (int32_t k : {1, 9, 23}) {
        const Outcome got = run(**e, resumed(r, whole.tokens, k));
        float max_diff = 0.0f;
        for (size_t i = 0; i < got.logprobs.size() && i + k < whole.logprobs.size(); ++i) {
          max_diff = std::max(max_diff, std::abs(got.logprobs[i].chosen.logprob -
                                                 whole.logprobs[i + k].chosen.logprob));
        }
        EXPECT_EQ(got.tokens, std::vector<int32_t>(whole.tokens.begin() + k, whole.tokens.end()))
            << "cut " << k;
        EXPECT_TRUE(std::equal(got.logprobs.begin(), got.logprobs.end(), whole.logprobs.begin() + k,
                               whole.logprobs.end()))
            << "cut " << k << ": chosen logprobs differ by up to " << max_diff;
      }
    }
  }
}

// The kernel paths: decode computes a position's KV with one-token matmuls and attention, the
// resumed request's prefill with many-token ones (other tilings, other kernels for quantized
// weights). Exact continuation needs them to agree bit for bit; the raw logprobs of every step
// (a function of all logits) show any difference.
TEST(EngineResumeKernelsTest, PrefillOfResumedTokensMatchesTheirDecodeOnEveryKernelPath) {
  const std::string dir = testing::make_temp_dir("resume-kernels");
  ThreadPool pool(1);
  for (DType weights : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_0}) {
    model::RandomModelSpec spec;
    spec.shape = *model::find_model_shape("tiny");
    spec.weight_type = weights;
    spec.seed = 5;
    const std::string path = dir + "/" + std::string(dtype_name(weights)) + ".gguf";
    ASSERT_TRUE(model::write_random_model(spec, path, pool).ok());
    const bool quantized = weights == DType::kQ8_0 || weights == DType::kQ4_0;
    for (bool grouped : {true, false}) {  // quantized rows regrouped at load (the default) or not
      if (!grouped && !quantized) continue;
      model::ModelOptions options;
      options.group_weights = grouped;
      auto model = model::Model::open(path, options);
      ASSERT_TRUE(model.ok()) << model.error().to_string();
      expect_prefill_matches_decode(
          **model, std::string(dtype_name(weights)) + (grouped ? " grouped" : " rows"));
    }
  }
}

}  // namespace
}  // namespace keel::engine
