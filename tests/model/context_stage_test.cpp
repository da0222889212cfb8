// Pipeline stages of Context (LayerRange): stage 0 over layers [0, k) then stage 1 over [k, n),
// each with a KV storage of only its own layers, give the same logits as the whole model over a
// prefill of two sequences (one in two chunks) and several greedy decode steps, on stories260K
// (real weights). Bit for bit: each layer runs the same kernels on the same rows in the same
// order whichever Context holds it (the residual crosses as raw floats and a stage's KV rows sit
// at the same block/row as the full storage's), so any difference is a bug, not rounding.
// Also: a partial range refuses the full-model entry points and a KV layout of the wrong depth.
#include <gtest/gtest.h>

#include <cstring>

#include "support/test_support.h"
#include "test_util.h"

namespace keel::model::testing {
namespace {

KvStorage storage_for(const Model& m, int64_t n_layer, int32_t num_blocks) {
  KvLayout layout = KvLayout::for_model(m.hparams(), 16, DType::kF32);
  layout.n_layer = n_layer;
  Result<KvStorage> kv = KvStorage::create(layout, num_blocks);
  KEEL_CHECK(kv.ok());
  return std::move(*kv);
}

class ContextStageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto m = Model::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(*m);
    pool_ = std::make_unique<ThreadPool>(2);
    ops_ = std::make_unique<kernels::Ops>(test_isa(), pool_.get());
  }
  std::unique_ptr<Model> model_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<kernels::Ops> ops_;
};

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST_F(ContextStageTest, TwoStagesEqualTheFullModelBitForBit) {
  const int64_t n_layer = model_->hparams().n_layer;
  ASSERT_GE(n_layer, 2);
  const int64_t split = n_layer / 2;
  constexpr int32_t kBlocks = 16;
  KvStorage kv_full = storage_for(*model_, n_layer, kBlocks);
  KvStorage kv0 = storage_for(*model_, split, kBlocks);
  KvStorage kv1 = storage_for(*model_, n_layer - split, kBlocks);
  Context full(*model_, 64);
  Context stage0(*model_, 64, LayerRange{0, split});
  Context stage1(*model_, 64, LayerRange{split, -1});

  // Two sequences over scattered blocks; sequence A's prompt in two chunks.
  std::vector<std::vector<int32_t>> tables = {{7, 2, 11, 4}, {1, 9, 14, 3}};
  std::vector<std::vector<int32_t>> prompts = {
      {1, 403, 52, 90, 17, 250, 33, 8, 61, 77, 5, 300, 120, 45, 19, 2, 88, 140, 66, 31},
      {1, 12, 300, 41, 7}};
  std::vector<int32_t> next(2, 0), pos(2, 0);
  const int64_t n_vocab = model_->hparams().n_vocab;
  auto run = [&](const Batch& b) {
    std::vector<float> want, got, residual;
    ASSERT_TRUE(full.forward(b, kv_full, *ops_, &want).ok());
    ASSERT_TRUE(stage0.forward_first_stage(b, kv0, *ops_, &residual).ok());
    ASSERT_EQ(residual.size(), b.size() * static_cast<size_t>(model_->hparams().n_embd));
    ASSERT_TRUE(stage1.forward_stage_from(b, residual, kv1, *ops_, &got, nullptr).ok());
    ASSERT_TRUE(same_bits(want, got)) << "max |diff| " << max_abs_diff(want, got);
    // Greedy continuation from each sequence's last row (rows in batch order).
    size_t row = 0;
    for (size_t t = 0; t < b.size(); ++t) {
      if (!b.logits[t]) continue;
      next[static_cast<size_t>(b.seq_index[t])] = argmax(want.data() + row * n_vocab, n_vocab);
      ++row;
    }
  };
  auto prefill = [&](Batch& b, int s, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      b.add(prompts[s][i], pos[s]++, s, i + 1 == prompts[s].size());
    }
  };
  Batch b;
  b.add_seq(tables[0]);
  b.add_seq(tables[1]);
  prefill(b, 0, 0, 12);
  prefill(b, 1, 0, prompts[1].size());
  run(b);
  b.clear_tokens();
  prefill(b, 0, 12, prompts[0].size());
  b.add(next[1], pos[1]++, 1, true);  // sequence B decodes alongside A's second chunk
  run(b);
  for (int step = 0; step < 6; ++step) {
    b.clear_tokens();
    for (int s = 0; s < 2; ++s) b.add(next[s], pos[s]++, s, true);
    run(b);
  }
}

TEST_F(ContextStageTest, PartialRangeRefusesWholeModelPassesAndWrongDepth) {
  const int64_t n_layer = model_->hparams().n_layer;
  const int64_t split = n_layer / 2;
  KvStorage kv0 = storage_for(*model_, split, 4);
  KvStorage kv_full = storage_for(*model_, n_layer, 4);
  Context stage0(*model_, 8, LayerRange{0, split});
  Context stage1(*model_, 8, LayerRange{split, -1});
  Batch b;
  b.add_seq({0});
  b.add(1, 0, 0, true);
  std::vector<float> out, residual;
  EXPECT_EQ(stage0.forward(b, kv0, *ops_, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(stage0.forward_first_stage(b, kv_full, *ops_, &residual).code(),
            StatusCode::kInvalidArgument);
  ASSERT_TRUE(stage0.forward_first_stage(b, kv0, *ops_, &residual).ok());
  std::vector<float> short_residual(residual.begin(), residual.end() - 1);
  KvStorage kv1 = storage_for(*model_, n_layer - split, 4);
  EXPECT_EQ(stage1.forward_stage_from(b, short_residual, kv1, *ops_, &out, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(stage1.forward_first_stage(b, kv1, *ops_, &residual).code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::model::testing
