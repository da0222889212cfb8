// The forward pass on tiny synthetic models: agreement with an independent double-precision
// reference for every architecture feature, invariants that tie the architectures together
// (qwen2 with zero bias = llama with Q/K rows reordered; qwen3 QK-norm scale invariance), output
// selection, rewriting a sequence's suffix, and a precise Status (and no change to the KV
// storage) for every malformed batch; hidden rows beside the logits change no logit bit.
#include "model/context.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

using ::testing::HasSubstr;

const std::vector<int32_t> kTokens = {1, 17, 5, 39, 22, 8, 30};

struct Case {
  const char* name;
  TinySpec spec;
  // Max |Δlogit| against the double-precision reference. F32 weights: float rounding only.
  // F16/BF16 weights: matmul rounds the activations to the weight's type first (as llama.cpp
  // does), a relative error of 2^-11 (f16) or 2^-8 (bf16) per element on logits of a few units.
  double tolerance = 1e-4;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

TinySpec spec_with(const std::function<void(TinySpec&)>& fn) {
  TinySpec s;
  fn(s);
  return s;
}

std::vector<Case> reference_cases() {
  return {
      {"llama", TinySpec()},
      {"llama_tied_mqa", spec_with([](TinySpec& s) {
         s.tied_output = true;
         s.n_head_kv = 1;
       })},
      {"llama_partial_rotary", spec_with([](TinySpec& s) { s.n_rot = 4; })},
      {"llama3_freqs_linear_scaling", spec_with([](TinySpec& s) {
         s.rope_freqs = {1.0f, 1.5f, 4.0f, 8.0f};
         s.rope_scaling_type = "linear";
         s.rope_scaling_factor = 2.0f;
         s.freq_base = 500000.0f;
       })},
      // YaRN (it turns every position): adjacent pairs, n_rot 8 over an original context of 8
      // (ramp over pairs 0..1) with rope.scaling.attn_factor; NeoX pairs, n_rot 16, base 100
      // over 16 (ramp over pairs 0..2, pair 1 half way).
      {"llama_yarn_attn_factor", spec_with([](TinySpec& s) {
         s.rope_scaling_type = "yarn";
         s.rope_scaling_factor = 4.0f;
         s.rope_orig_ctx = 8;
         s.rope_attn_factor = 0.9f;
       })},
      {"qwen3_yarn", spec_with([](TinySpec& s) {
         s.arch = "qwen3";
         s.head_dim = 16;
         s.freq_base = 100.0f;
         s.rope_scaling_type = "yarn";
         s.rope_scaling_factor = 8.0f;
         s.rope_orig_ctx = 16;
       })},
      {"qwen2_bias", spec_with([](TinySpec& s) { s.arch = "qwen2"; })},
      {"qwen3_qk_norm_wide_heads", spec_with([](TinySpec& s) {
         s.arch = "qwen3";
         s.head_dim = 16;
       })},
      {"llama_f16", spec_with([](TinySpec& s) { s.matrix_dtype = DType::kF16; }), 5e-3},
      {"qwen2_bf16", spec_with([](TinySpec& s) {
         s.arch = "qwen2";
         s.matrix_dtype = DType::kBF16;
         s.norm_dtype = DType::kBF16;
       }),
       4e-2},
  };
}

class ForwardReferenceTest : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardReferenceTest, AllPositionsMatchDoublePrecisionReference) {
  const TinyModel m = write_tiny_model(GetParam().spec);
  Runner r(m.path);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::vector<float> got = r.feed(kTokens, 0);
  const auto ref = reference_logits(m, kTokens);
  ASSERT_EQ(got.size(), kTokens.size() * 40);
  double worst = 0.0, spread = 0.0;
  for (size_t t = 0; t < kTokens.size(); ++t) {
    worst = std::max(worst, max_abs_diff(got.data() + t * 40, ref[t].data(), 40));
    for (float v : ref[t]) spread = std::max(spread, std::fabs(double{v}));
  }
  EXPECT_LE(worst, GetParam().tolerance) << GetParam().name;
  EXPECT_GT(spread, 0.5) << "logits too small for the comparison to mean anything";
  // Token by token into another sequence (other blocks) gives the same logits.
  const std::vector<float> step = r.feed(kTokens, 1, 0, /*one_by_one=*/true);
  EXPECT_LE(max_abs_diff(step, got), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Specs, ForwardReferenceTest, ::testing::ValuesIn(reference_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

std::vector<float> run_tokens(const TinySpec& spec) {
  Runner r(write_tiny_model(spec).path);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.feed(kTokens, 0) : std::vector<float>();
}

// NeoX RoPE rotates pairs (i, i + d/2); adjacent-pair RoPE rotates (2i, 2i + 1). Reordering the
// rows of W_q and W_k within each head so that rows (i, i + d/2) land at (2i, 2i + 1) turns one
// into the other, and q·k is unchanged by applying the same permutation to q and k.
TEST(ArchInvariantTest, Qwen2WithZeroBiasIsLlamaWithInterleavedQkRows) {
  TinySpec qwen2;
  qwen2.arch = "qwen2";
  qwen2.zero_bias = true;
  TinySpec llama_plain;  // same seed: identical shared tensors
  TinySpec llama_perm;
  llama_perm.transform = [](const std::string& name, std::vector<float>& w) {
    if (name.find("attn_q.weight") == std::string::npos &&
        name.find("attn_k.weight") == std::string::npos) {
      return;
    }
    const size_t hd = 8, cols = 32;
    std::vector<float> out(w.size());
    for (size_t row = 0; row < w.size() / cols; ++row) {
      const size_t h = row / hd, i = row % hd;
      const size_t src = h * hd + (i % 2 == 0 ? i / 2 : i / 2 + hd / 2);
      std::copy_n(w.begin() + static_cast<ptrdiff_t>(src * cols), cols,
                  out.begin() + static_cast<ptrdiff_t>(row * cols));
    }
    w = out;
  };
  const std::vector<float> a = run_tokens(qwen2), b = run_tokens(llama_perm),
                           c = run_tokens(llama_plain);
  ASSERT_FALSE(a.empty());
  EXPECT_LE(max_abs_diff(a, b), 1e-5);
  EXPECT_GT(max_abs_diff(a, c), 1e-2) << "RoPE ordering made no difference";
}

TEST(ArchInvariantTest, Qwen2BiasMatters) {
  TinySpec zero;
  zero.arch = "qwen2";
  zero.zero_bias = true;
  TinySpec biased;
  biased.arch = "qwen2";
  EXPECT_GT(max_abs_diff(run_tokens(zero), run_tokens(biased)), 1e-2);
}

// Per-head RMSNorm of q and k makes qwen3 insensitive to the scale of W_q and W_k.
TEST(ArchInvariantTest, Qwen3QkNormCancelsQkScale) {
  const auto scale_qk = [](const std::string& name, std::vector<float>& w) {
    if (name.find("attn_q.weight") != std::string::npos ||
        name.find("attn_k.weight") != std::string::npos) {
      for (float& v : w) v *= 3.0f;
    }
  };
  TinySpec q3;
  q3.arch = "qwen3";
  q3.rms_eps = 1e-6f;
  TinySpec q3_scaled = q3;
  q3_scaled.transform = scale_qk;
  EXPECT_LE(max_abs_diff(run_tokens(q3), run_tokens(q3_scaled)), 1e-4);
  TinySpec llama;
  TinySpec llama_scaled;
  llama_scaled.transform = scale_qk;
  EXPECT_GT(max_abs_diff(run_tokens(llama), run_tokens(llama_scaled)), 1e-2);
  TinySpec q3_other_norm = q3;
  q3_other_norm.value_override = {{"blk.0.attn_k_norm.weight", std::vector<float>(8, 2.0f)}};
  EXPECT_GT(max_abs_diff(run_tokens(q3), run_tokens(q3_other_norm)), 1e-2);
}

class ContextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = write_tiny_model(TinySpec());
    ModelOptions o;
    o.n_ctx = 8;
    RunnerKv kv;
    kv.block_size = 4;
    kv.n_seqs = 2;
    kv.spare_blocks = 1;
    runner_ = std::make_unique<Runner>(model_.path, o, 2, /*max_batch=*/6, kv);
    ASSERT_TRUE(runner_->ok()) << runner_->status().to_string();
  }
  Status run(const Batch& b) {
    logits_ = {42.0f};
    return runner_->forward(b, &logits_);
  }
  Batch batch(std::vector<int32_t> positions, int32_t seq = 0) const {
    Batch b = runner_->batch();
    for (int32_t p : positions) b.add(3, p, seq, true);
    return b;
  }
  // Runs a batch that must fail with `code` and `message`, leaving storage and logits alone.
  void expect_rejected(const Batch& b, StatusCode code, const std::string& message) {
    const std::vector<std::byte> before = runner_->snapshot();
    const Status st = run(b);
    EXPECT_EQ(st.code(), code) << st.to_string();
    EXPECT_EQ(st.message(), message);
    EXPECT_EQ(logits_, std::vector<float>{42.0f}) << "a failed forward must not touch outputs";
    EXPECT_TRUE(runner_->snapshot() == before) << "a failed forward must not touch the KV storage";
  }

  TinyModel model_;
  std::unique_ptr<Runner> runner_;
  std::vector<float> logits_;
};

TEST_F(ContextTest, PositionAtContextSizeIsOutOfRange) {
  ASSERT_TRUE(run(batch({0, 1, 2, 3, 4, 5})).ok());
  ASSERT_TRUE(run(batch({6, 7})).ok());
  expect_rejected(batch({8}), StatusCode::kOutOfRange,
                  "batch token 0: position 8 is beyond the context size 8");
}

TEST_F(ContextTest, FailedBatchLeavesTheStorageAlone) {
  ASSERT_TRUE(run(batch({0, 1, 2, 3, 4})).ok());
  const std::vector<float> before = logits_;
  // Crosses n_ctx at its last token, after three tokens that would write rows.
  expect_rejected(batch({5, 6, 7, 8}), StatusCode::kOutOfRange,
                  "batch token 3: position 8 is beyond the context size 8");
  // Re-running position 4 (a rewrite) gives the same logits as before.
  ASSERT_TRUE(run(batch({4})).ok());
  EXPECT_EQ(max_abs_diff(logits_.data(), before.data() + 4 * 40, 40), 0.0);
}

TEST_F(ContextTest, MalformedBatchesAreRejectedPrecisely) {
  ASSERT_TRUE(run(batch({0, 1, 2, 3, 4})).ok());  // non-zero storage for the snapshots
  const StatusCode kInvalid = StatusCode::kInvalidArgument;
  Batch b = batch({0});
  b.tokens[0] = 40;
  expect_rejected(b, kInvalid, "batch token 0: token id 40 is outside the vocabulary [0, 40)");
  b.tokens[0] = -1;
  expect_rejected(b, kInvalid, "batch token 0: token id -1 is outside the vocabulary [0, 40)");
  expect_rejected(batch({0}, /*seq=*/2), kInvalid,
                  "batch token 0: sequence index 2 is outside [0, 2)");
  b = batch({0, 1});
  b.logits.pop_back();
  expect_rejected(b, kInvalid,
                  "batch fields differ in length: tokens 2, positions 2, seq_index 2, logits 1");
  expect_rejected(Batch(), kInvalid, "batch has 0 tokens; this context takes 1 to 6");
  expect_rejected(batch({0, 1, 2, 3, 4, 5, 6}), kInvalid,
                  "batch has 7 tokens; this context takes 1 to 6");
  expect_rejected(batch({3, 3}), kInvalid,
                  "batch token 1: position 3 of sequence 0 does not follow position 3 (positions "
                  "within a sequence must increase)");
  expect_rejected(batch({3, 2}), kInvalid,
                  "batch token 1: position 2 of sequence 0 does not follow position 3 (positions "
                  "within a sequence must increase)");
  expect_rejected(batch({-1}), kInvalid, "batch token 0: position -1 is negative");
  b = batch({5});
  b.seqs[0].block_table.resize(1);
  expect_rejected(b, kInvalid,
                  "batch token 0: position 5 of sequence 0 needs block table entry 1, but the "
                  "table has 1 entries (block size 4)");
  // Every entry up to the position's block is checked, not only the one written.
  b = batch({5});
  b.seqs[0].block_table[0] = 5;
  expect_rejected(b, kInvalid,
                  "batch token 0: sequence 0's block table entry 0 is block 5, outside [0, 5)");
  b.seqs[0].block_table[0] = -1;
  expect_rejected(b, kInvalid,
                  "batch token 0: sequence 0's block table entry 0 is block -1, outside [0, 5)");
  // Two sequences sharing a block may not both write a row of it.
  b = batch({4});
  b.seqs[1].block_table = b.seqs[0].block_table;
  b.add(3, 4, 1, true);
  expect_rejected(b, kInvalid,
                  "batch tokens 0 and 1 write the same KV row (block " +
                      std::to_string(b.seqs[0].block_table[1]) + ", row 0)");
  b.positions[1] = 3;  // different rows of one shared block: fine
  EXPECT_TRUE(run(b).ok());
}

TEST_F(ContextTest, StorageMustFitTheModel) {
  auto other = KvStorage::create(KvLayout{2, 8, 4, DType::kF32}, 4);  // tiny model: kv_dim 16
  ASSERT_TRUE(other.ok()) << other.error().to_string();
  Context ctx(runner_->model(), 4);
  Batch b;
  b.add_seq({0});
  b.add(3, 0, 0, true);
  std::vector<float> logits;
  const Status st = ctx.forward(b, *other, runner_->ops(), &logits);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "KV storage layout (2 layers, rows of 8) does not match the model (2 layers, rows of "
            "16)");
}

TEST_F(ContextTest, LogitsOnlyForTokensThatAskInBatchOrder) {
  const std::vector<float> all = runner_->feed({4, 9, 13, 2, 31}, 0);
  Batch b = runner_->batch();
  const std::vector<int32_t> toks = {4, 9, 13, 2, 31};
  for (int32_t i = 0; i < 5; ++i) b.add(toks[static_cast<size_t>(i)], i, 0, i == 1 || i == 4);
  ASSERT_TRUE(run(b).ok());
  ASSERT_EQ(logits_.size(), 80u);
  EXPECT_EQ(max_abs_diff(logits_.data(), all.data() + 40, 40), 0.0);
  EXPECT_EQ(max_abs_diff(logits_.data() + 40, all.data() + 160, 40), 0.0);
  for (auto& l : b.logits) l = 0;
  ASSERT_TRUE(run(b).ok());
  EXPECT_TRUE(logits_.empty());
  EXPECT_TRUE(runner_->forward(b, nullptr).ok());
}

// forward_hidden returns the rows the output head multiplies: the head applied to them gives
// forward()'s logits, for the same tokens in the same order.
TEST_F(ContextTest, ForwardHiddenIsWhatTheHeadMultiplies) {
  const std::vector<int32_t> toks = {4, 9, 13, 2, 31};
  Batch b = runner_->batch();
  for (int32_t i = 0; i < 5; ++i) b.add(toks[static_cast<size_t>(i)], i, 0, i == 1 || i == 4);
  ASSERT_TRUE(run(b).ok());
  Context ctx(runner_->model(), 6);
  std::vector<float> hidden = {42.0f};
  ASSERT_TRUE(ctx.forward_hidden(b, runner_->storage(), runner_->ops(), &hidden).ok());
  const int64_t n_embd = runner_->model().hparams().n_embd;
  ASSERT_EQ(hidden.size(), static_cast<size_t>(2 * n_embd));
  std::vector<float> logits(80);
  runner_->ops().matmul(runner_->model().weights().output, hidden.data(), 2, logits.data());
  EXPECT_LE(max_abs_diff(logits, logits_), 1e-5);
  for (auto& l : b.logits) l = 0;
  ASSERT_TRUE(ctx.forward_hidden(b, runner_->storage(), runner_->ops(), &hidden).ok());
  EXPECT_TRUE(hidden.empty());
  b.tokens[0] = 40;  // out of the vocabulary: rejected like forward()
  EXPECT_EQ(ctx.forward_hidden(b, runner_->storage(), runner_->ops(), &hidden).code(),
            StatusCode::kInvalidArgument);
}

// A sequence's positions may be recomputed from any point whose prefix is valid (what a
// preempted or rolled-back request does): the rewritten suffix gives the same logits.
TEST_F(ContextTest, RewritingASuffixGivesTheSameLogits) {
  const std::vector<int32_t> toks = {4, 9, 13, 2, 31, 7};
  const std::vector<float> first = runner_->feed(toks, 1);
  runner_->feed({5, 5}, 1, 3);  // overwrite positions 3 and 4 with other tokens
  const std::vector<float> tail = runner_->feed({2, 31, 7}, 1, 3);
  EXPECT_EQ(max_abs_diff(tail.data(), first.data() + 3 * 40, 3 * 40), 0.0);
  EXPECT_EQ(max_abs_diff(runner_->feed(toks, 1), first), 0.0);
}

}  // namespace
}  // namespace keel::model::testing

namespace keel::model::testing {
namespace {

// forward() with hidden rows (the draft head's features): the logits are bit for bit those of
// forward() without them, and the rows are forward_hidden()'s, for the tokens with logits only.
TEST(ContextHiddenTest, HiddenRowsLeaveTheLogitsBitForBit) {
  const TinyModel m = write_tiny_model(TinySpec());
  auto model = Model::open(m.path);
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  ThreadPool pool(2);
  kernels::Ops ops(kernels::best_isa(detect_cpu_features()), &pool);
  const HParams& hp = (*model)->hparams();
  // mode 0: logits only; 1: logits and hidden; 2: forward_hidden.
  auto run = [&](int mode, std::vector<float>* logits, std::vector<float>* hidden) {
    auto kv = KvStorage::create(KvLayout::for_model(hp, 4, DType::kF32), 4);
    ASSERT_TRUE(kv.ok());
    Context ctx(**model, 8);
    Batch b;
    const int32_t s = b.add_seq({0, 1, 2, 3});
    for (int32_t i = 0; i < 6; ++i) b.add(3 + 5 * i, i, s, i % 2 == 1 || i == 4);
    const Status st = mode == 0   ? ctx.forward(b, *kv, ops, logits)
                      : mode == 1 ? ctx.forward(b, *kv, ops, logits, hidden)
                                  : ctx.forward_hidden(b, *kv, ops, hidden);
    ASSERT_TRUE(st.ok()) << st.to_string();
  };
  std::vector<float> plain, with, hidden, reference;
  run(0, &plain, nullptr);
  run(1, &with, &hidden);
  run(2, nullptr, &reference);
  ASSERT_EQ(plain.size(), static_cast<size_t>(4 * hp.n_vocab));  // tokens 1, 3, 4, 5
  EXPECT_EQ(with, plain);                                        // bit for bit
  ASSERT_EQ(hidden.size(), static_cast<size_t>(4 * hp.n_embd));
  EXPECT_EQ(hidden, reference);
}

}  // namespace
}  // namespace keel::model::testing
