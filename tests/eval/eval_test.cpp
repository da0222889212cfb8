// The eval harnesses on stories260K with tiny parameters: spec eval's autoregressive row agrees
// with itself and n-gram speculation's greedy ids equal it (a missing draft head is a skipped
// row, not an error); pic eval's full variant is the reference; kv eval's f32 row is the reference
// and f16 halves its bytes; sparse eval's dense policy matches dense exactly while StreamingLLM
// holds fewer pages; model bench reports every test and its +exit row, and refuses bad configs; the
// model's cost and roofline bound follow from its tensors.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "eval/kv_eval.h"
#include "eval/model_bench.h"
#include "eval/model_cost.h"
#include "eval/pic_eval.h"
#include "eval/sparse_eval.h"
#include "eval/spec_eval.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "support/test_support.h"
#include "tokenizer/tokenizer.h"

namespace keel::eval {
namespace {

class EvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto m = model::Model::open(testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    model_ = std::move(m).value();
    auto tok = tokenizer::Tokenizer::from_gguf(model_->file());
    ASSERT_TRUE(tok.ok()) << tok.error().to_string();
    tok_ = std::make_unique<tokenizer::Tokenizer>(std::move(tok).value());
  }

  const kernels::Isa isa_ = kernels::best_isa(detect_cpu_features());
  ThreadPool pool_{1};
  kernels::Ops ops_{isa_, &pool_};
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(EvalTest, SpecNgramRowsAreAutoregressiveAndAMissingHeadIsSkipped) {
  SpecEvalConfig c;
  c.workloads = {{"repetitive", {"The cat sat on the mat. The cat sat on the mat. The cat sat"}}};
  c.max_tokens = 12;
  c.k = 3;
  c.exit_thresholds = {};  // the draft-head row only (shared data holds no head: skipped)
  auto report = run_spec_eval(*model_, *tok_, isa_, 1, c);
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  ASSERT_EQ(report->rows.size(), report->skipped.empty() ? 3u : 2u);
  const SpecRow& ar = report->rows[0];
  const SpecRow& ngram = report->rows[1];
  EXPECT_EQ(ar.workload, "repetitive");
  EXPECT_EQ(ar.config, "autoregressive");
  EXPECT_EQ(ngram.config, "ngram k=3");
  ASSERT_EQ(ar.outputs.size(), 1u);
  EXPECT_EQ(ar.outputs[0].size(), 12u);
  EXPECT_GT(ar.generated, 0);
  EXPECT_EQ(ar.token_agreement, 1.0);
  EXPECT_EQ(ar.drafted, 0);
  EXPECT_EQ(ar.layers, 0.0);  // not early exit
  EXPECT_GT(ar.perplexity, 1.0);
  // Greedy speculation verifies against the target's argmax: the ids are autoregressive's.
  EXPECT_EQ(ngram.outputs, ar.outputs);
  EXPECT_EQ(ngram.token_agreement, 1.0);
  EXPECT_EQ(ngram.generated, ar.generated);
  EXPECT_GT(ngram.drafted, 0);  // the prompt repeats itself: lookup finds drafts
  EXPECT_LE(ngram.accepted, ngram.drafted);
  EXPECT_DOUBLE_EQ(ngram.perplexity, ar.perplexity);  // the same text scores the same
  EXPECT_LT(ngram.steps, ar.steps + 1);               // accepted drafts save steps
  for (const std::string& why : report->skipped) {
    EXPECT_NE(why.find("draft-head rows skipped"), std::string::npos) << why;
  }
}

TEST_F(EvalTest, PicFullVariantIsTheReference) {
  PicEvalConfig c;
  c.prompts = 1;
  c.chunks = 2;
  c.chunk_len = 16;
  c.query_len = 4;
  c.continuation = 4;
  c.variants = {"full", "naive", "legolink-4096"};
  ASSERT_TRUE(c.validate().ok());
  auto results = run_pic_eval(*model_, *tok_, ops_, c);
  ASSERT_TRUE(results.ok()) << results.error().to_string();
  ASSERT_EQ(results->size(), 3u);
  const PicVariantResult& full = (*results)[0];
  const PicVariantResult& naive = (*results)[1];
  EXPECT_EQ(full.variant.name(), "full");
  EXPECT_EQ(full.top1_agreement, 1.0);
  EXPECT_LT(full.kl, 1e-9);
  EXPECT_EQ(full.greedy_match_tokens, 4.0);
  EXPECT_EQ(full.recompute_fraction, 1.0);
  EXPECT_EQ(full.prompts, 1);
  EXPECT_EQ((*results)[2].k, 4096);
  EXPECT_EQ((*results)[2].top1_agreement, 1.0);  // every chunk token recomputed
  EXPECT_LT(naive.recompute_fraction, full.recompute_fraction);

  c.variants = {"legolink-x"};
  EXPECT_FALSE(c.validate().ok());
  EXPECT_FALSE(run_pic_eval(*model_, *tok_, ops_, c).ok());
}

TEST_F(EvalTest, KvF32IsTheReferenceAndF16HalvesTheBytes) {
  KvEvalConfig c;
  c.prompts = 1;
  c.prompt_len = 8;
  c.max_len = 24;
  c.greedy = 8;
  c.kv_types = {"f16", "f32"};  // f32 again is not repeated
  auto results = run_kv_eval(*model_, *tok_, ops_, c);
  ASSERT_TRUE(results.ok()) << results.error().to_string();
  ASSERT_EQ(results->size(), 2u);
  const KvTypeResult& f32 = (*results)[0];
  const KvTypeResult& f16 = (*results)[1];
  EXPECT_EQ(f32.type, DType::kF32);
  EXPECT_EQ(f16.type, DType::kF16);
  EXPECT_EQ(f32.top1_agreement, 1.0);
  EXPECT_EQ(f32.kl, 0.0);
  EXPECT_EQ(f32.max_abs_dlogit, 0.0);
  EXPECT_EQ(f32.greedy_agreement, 1.0);
  EXPECT_EQ(f32.greedy_shared_prefix, 8.0);
  EXPECT_EQ(f32.forced_steps, 24 - 8);
  EXPECT_EQ(f32.bytes_per_token, 2 * f16.bytes_per_token);
  EXPECT_EQ(f16.ratio_to_f16, 1.0);
  EXPECT_EQ(f32.ratio_to_f16, 2.0);
  EXPECT_GT(f16.max_abs_dlogit, 0.0);  // f16 rounds the K/V rows
  EXPECT_GT(f32.perplexity, 1.0);

  c.max_len = 100000;
  auto bad = run_kv_eval(*model_, *tok_, ops_, c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message().find("--max-len must be in"), std::string::npos);
}

TEST_F(EvalTest, SparseDensePolicyMatchesDenseExactly) {
  SparseEvalConfig c;
  c.prompts = 1;
  c.prompt_len = 16;
  c.max_len = 96;
  c.budget = 32;
  c.policies = {"dense", "streaming"};
  auto report = run_sparse_eval(*model_, *tok_, ops_, c);
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  EXPECT_EQ(report->generated_tokens, 96 - 16);
  ASSERT_EQ(report->policies.size(), 2u);
  const SparsePolicyResult& dense = report->policies[0];
  const SparsePolicyResult& streaming = report->policies[1];
  EXPECT_EQ(dense.policy, "dense");
  EXPECT_EQ(dense.top1_agreement, 1.0);
  EXPECT_EQ(dense.kl, 0.0);
  EXPECT_EQ(dense.prefill_pages, 1);
  EXPECT_EQ(dense.max_pages_held, (96 - 1) / 16 + 1);  // every page
  EXPECT_EQ(dense.curve_tokens.back(), 96 - 16);
  EXPECT_LE(streaming.max_pages_held, 32 / 16 + 1);
  EXPECT_GT(streaming.kl, 0.0);

  c.budget = 8;  // below a page
  EXPECT_FALSE(run_sparse_eval(*model_, *tok_, ops_, c).ok());
}

TEST_F(EvalTest, ModelBenchRunsEveryTestAndTheExitRows) {
  ModelBenchConfig c;
  c.n_prompt = {8};
  c.n_gen = {4};
  c.n_depth = {0, 8};
  c.reps = 2;
  c.exit_predictors = "random";
  auto report = run_model_bench(*model_, pool_, isa_, c);
  ASSERT_TRUE(report.ok()) << report.error().to_string();
  ASSERT_EQ(report->tests.size(), 5u);
  const char* names[] = {"pp8", "tg4", "tg4+exit", "tg4@d8", "tg4@d8+exit"};
  for (size_t i = 0; i < 5; ++i) {
    const BenchTest& t = report->tests[i];
    EXPECT_EQ(t.name, names[i]);
    EXPECT_EQ(t.samples_ts.size(), 2u) << t.name;
    EXPECT_GT(t.avg_ts, 0.0) << t.name;
    EXPECT_EQ(t.with_exit, t.name.ends_with("+exit")) << t.name;
    EXPECT_EQ(t.bound_ts, 0.0) << t.name;  // no roofline
  }
  EXPECT_DOUBLE_EQ(report->tests[2].plain_ts, report->tests[1].avg_ts);
  EXPECT_TRUE(report->with_exit);
  EXPECT_NE(report->exit_source.find("random"), std::string::npos);
  EXPECT_GT(report->exit_threshold, 1.0f);  // nothing exits

  c.reps = 0;
  EXPECT_FALSE(c.validate().ok());
  c.reps = 1;
  c.n_prompt = {100000};
  auto too_long = run_model_bench(*model_, pool_, isa_, c);
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.error().code(), StatusCode::kOutOfRange);
}

TEST_F(EvalTest, ModelCostAndTheDecodeBound) {
  const ModelCost cost = model_cost(*model_);
  uint64_t bytes = 0;
  for (const auto& t : model_->file().tensors()) bytes += t.num_bytes;
  EXPECT_EQ(cost.size_bytes, bytes);
  EXPECT_GT(cost.n_params, 200'000u);
  EXPECT_LE(cost.decode_bytes, cost.size_bytes);
  EXPECT_GT(cost.matmul_flops, 0.0);
  EXPECT_EQ(cost.main_type, DType::kF32);
  kernels::Roofline roof;
  roof.read_gbs = 2.0;
  roof.fp32_gflops = 100.0;
  const SpeedBound tg = speed_bound(cost, model_->hparams(), roof, 0);
  EXPECT_DOUBLE_EQ(tg.tokens_per_second, 2e9 / static_cast<double>(cost.decode_bytes));
  EXPECT_EQ(tg.bound_by, "2.0 GB/s read");
  const SpeedBound pp = speed_bound(cost, model_->hparams(), roof, 16);
  EXPECT_DOUBLE_EQ(pp.tokens_per_second,
                   100e9 / (cost.matmul_flops + attention_flops(model_->hparams(), 16)));
  EXPECT_EQ(pp.bound_by, "100 G/s fp32 FMA");
}

}  // namespace
}  // namespace keel::eval
