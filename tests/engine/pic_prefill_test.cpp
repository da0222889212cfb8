// EPIC's link on a real model (stories260K), computed directly: layer-0 K compiled at chunk-local
// positions and re-rotated to its real position equals K computed there; LegoLink with k ≥ every
// chunk's length and CacheBlend-100% equal full recompute; with Q8_0 KV the re-rotated K stays
// within a few quantization steps of K computed there (the leading chunk, linked, is exact);
// naive linking differs (the test can fail); the CacheBlend probe sees no deviation in an exact
// cache and some in a naively linked one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "engine/pic_prefill.h"
#include "model/kv_relocate.h"
#include "support/test_support.h"

namespace keel::engine {
namespace {

constexpr int32_t kBlock = 16;

class PicPrefillTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    auto m = model::Model::open(keel::testing::shared_path("models/stories260K/stories260K.gguf"));
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    model_ = std::move(m).value();
    ops_ = std::make_unique<kernels::Ops>(kernels::best_isa(detect_cpu_features()), &pool_);
    ctx_ = std::make_unique<model::Context>(*model_, 512);
    const auto layout = model::KvLayout::for_model(model_->hparams(), kBlock, DType::kF32);
    auto kv = model::KvStorage::create(layout, 256);
    ASSERT_TRUE(kv.ok());
    kv_ = std::make_unique<model::KvStorage>(std::move(kv).value());
  }
  // `blocks` fresh block ids.
  std::vector<int32_t> table(int32_t blocks) {
    std::vector<int32_t> t(static_cast<size_t>(blocks));
    std::iota(t.begin(), t.end(), next_block_);
    next_block_ += blocks;
    return t;
  }
  // A story fragment: BOS, `first`, then greedy tokens (len in all).
  std::vector<int32_t> story(int32_t first, int32_t len) {
    std::vector<int32_t> toks = {1, first};
    const std::vector<int32_t> t = table(4);
    std::vector<float> logits;
    model::Batch b;
    const int32_t seq = b.add_seq(t);
    b.add(1, 0, seq, false);
    b.add(first, 1, seq, true);
    while (true) {
      EXPECT_TRUE(ctx_->forward(b, *kv_, *ops_, &logits).ok());
      if (static_cast<int32_t>(toks.size()) == len) return toks;
      const auto next =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      b.clear_tokens();
      b.add(next, static_cast<int32_t>(toks.size()), seq, true);
      toks.push_back(next);
    }
  }
  // Prompt = chunks (each with its own BOS) + a query; compiles every chunk into its own blocks.
  void make_prompt() {
    for (int32_t first : {403, 300, 350}) {
      const std::vector<int32_t> c = story(first, 27 + first % 7);
      chunks_.push_back({static_cast<int32_t>(prompt_.size()), static_cast<int32_t>(c.size())});
      prompt_.insert(prompt_.end(), c.begin(), c.end());
      chunk_tables_.push_back(table(3));
      ASSERT_TRUE(compile_chunk(*ctx_, *kv_, *ops_, c, chunk_tables_.back()).ok());
    }
    for (int32_t t : {403, 407, 261, 378}) prompt_.push_back(t);
  }
  std::vector<float> prefill(const char* variant, PicPrefillStats* stats = nullptr) {
    std::vector<float> logits;
    const std::vector<int32_t> t = table(8);
    const Status st = pic_prefill(*model_, *ctx_, *kv_, *ops_, prompt_, chunks_, chunk_tables_, t,
                                  *kv::PicVariant::parse(variant), &logits, stats);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return logits;
  }
  static float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
    EXPECT_EQ(a.size(), b.size());
    float d = 0;
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
  }

  ThreadPool pool_{1};
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  std::unique_ptr<model::Context> ctx_;
  std::unique_ptr<model::KvStorage> kv_;
  int32_t next_block_ = 0;
  std::vector<int32_t> prompt_;
  std::vector<kv::PicChunk> chunks_;
  std::vector<std::vector<int32_t>> chunk_tables_;
};

// Q8_0 KV: the re-rotated K row (dequantized, rotated, quantized again) is within a few
// quantization steps of the row computed at the real position (each has its own rounding: half a
// step each, the first one rotated), and V rows are copied byte for byte.
TEST_F(PicPrefillTest, RerotatedQ8KeyStaysWithinQuantizationSteps) {
  auto q8 = model::KvStorage::create(
      model::KvLayout::for_model(model_->hparams(), kBlock, DType::kQ8_0), 64);
  ASSERT_TRUE(q8.ok()) << q8.error().to_string();
  kv_ = std::make_unique<model::KvStorage>(std::move(q8).value());
  const std::vector<int32_t> c = story(403, 20);
  const std::vector<int32_t> local = table(2), moved = table(4), direct = table(4);
  ASSERT_TRUE(compile_chunk(*ctx_, *kv_, *ops_, c, local).ok());
  const int32_t delta = 37;
  model::Batch b;
  const int32_t seq = b.add_seq(direct);
  for (size_t j = 0; j < c.size(); ++j) b.add(c[j], delta + static_cast<int32_t>(j), seq, false);
  ASSERT_TRUE(ctx_->forward(b, *kv_, *ops_, nullptr).ok());
  std::vector<model::KvRowMove> moves;
  for (int32_t j = 0; j < static_cast<int32_t>(c.size()); ++j) {
    const int32_t p = delta + j;
    moves.push_back({local[j / kBlock], j % kBlock, moved[p / kBlock], p % kBlock, delta});
  }
  model::move_kv_rows(model_->hparams(), *kv_, *ops_, moves);
  const int64_t dim = kv_->layout().kv_dim;
  std::vector<float> k1(static_cast<size_t>(dim)), k2(k1.size());
  float worst_steps = 0;
  for (int32_t j = 0; j < static_cast<int32_t>(c.size()); ++j) {
    const int32_t p = delta + j;
    kv_->read_row(kv_->k_row(moved[p / kBlock], 0, p % kBlock), k1.data());
    kv_->read_row(kv_->k_row(direct[p / kBlock], 0, p % kBlock), k2.data());
    float amax = 0, worst = 0;
    for (size_t i = 0; i < k1.size(); ++i) {
      amax = std::max(amax, std::abs(k2[i]));
      worst = std::max(worst, std::abs(k1[i] - k2[i]));
    }
    ASSERT_GT(amax, 0.0f);
    worst_steps = std::max(worst_steps, worst / (amax / 127.0f));
    EXPECT_EQ(std::memcmp(kv_->v_row(moved[p / kBlock], 0, p % kBlock),
                          kv_->v_row(local[j / kBlock], 0, j % kBlock), kv_->layout().row_bytes()),
              0);
  }
  std::printf("Q8_0 K re-rotation: worst |dK| = %.2f quantization steps\n", worst_steps);
  EXPECT_LE(worst_steps, 2.5f);
}

TEST_F(PicPrefillTest, RerotatedKeyEqualsKeyComputedAtTheRealPosition) {
  const std::vector<int32_t> c = story(403, 20);
  const std::vector<int32_t> local = table(2), moved = table(4), direct = table(4);
  ASSERT_TRUE(compile_chunk(*ctx_, *kv_, *ops_, c, local).ok());
  const int32_t delta = 37;
  // Directly at positions delta..: layer 0's K depends only on the token and its position.
  model::Batch b;
  const int32_t seq = b.add_seq(direct);
  for (size_t j = 0; j < c.size(); ++j) b.add(c[j], delta + static_cast<int32_t>(j), seq, false);
  ASSERT_TRUE(ctx_->forward(b, *kv_, *ops_, nullptr).ok());
  std::vector<model::KvRowMove> moves;
  for (int32_t j = 0; j < static_cast<int32_t>(c.size()); ++j) {
    const int32_t p = delta + j;
    moves.push_back({local[j / kBlock], j % kBlock, moved[p / kBlock], p % kBlock, delta});
  }
  model::move_kv_rows(model_->hparams(), *kv_, *ops_, moves);
  const model::KvLayout& l = kv_->layout();
  float worst = 0, norm = 0;
  for (int32_t j = 0; j < static_cast<int32_t>(c.size()); ++j) {
    const int32_t p = delta + j;
    const size_t row = static_cast<size_t>(p % kBlock) * l.row_bytes();
    const auto* k1 =
        reinterpret_cast<const float*>(kv_->block(moved[p / kBlock]) + l.k_offset(0) + row);
    const auto* k2 =
        reinterpret_cast<const float*>(kv_->block(direct[p / kBlock]) + l.k_offset(0) + row);
    for (int64_t i = 0; i < l.kv_dim; ++i) {
      worst = std::max(worst, std::abs(k1[i] - k2[i]));
      norm = std::max(norm, std::abs(k2[i]));
    }
  }
  EXPECT_LT(worst, 1e-5f * std::max(norm, 1.0f)) << "max |K| " << norm;
  EXPECT_GT(norm, 0.1f);
  // Without the rotation the rows would differ (the check can fail).
  for (auto& m : moves) m.delta = 0;
  model::move_kv_rows(model_->hparams(), *kv_, *ops_, moves);
  const size_t row = static_cast<size_t>((delta + 5) % kBlock) * l.row_bytes();
  const auto* k1 =
      reinterpret_cast<const float*>(kv_->block(moved[(delta + 5) / kBlock]) + l.k_offset(0) + row);
  const auto* k2 = reinterpret_cast<const float*>(kv_->block(direct[(delta + 5) / kBlock]) +
                                                  l.k_offset(0) + row);
  float unrotated = 0;
  for (int64_t i = 0; i < l.kv_dim; ++i) unrotated = std::max(unrotated, std::abs(k1[i] - k2[i]));
  EXPECT_GT(unrotated, 1e-2f);
}

TEST_F(PicPrefillTest, LegoLinkOverWholeChunksEqualsFullRecompute) {
  make_prompt();
  PicPrefillStats full_stats, lego_stats, naive_stats;
  const std::vector<float> full = prefill("full", &full_stats);
  EXPECT_EQ(full_stats.recomputed, static_cast<int32_t>(prompt_.size()));
  const std::vector<float> lego = prefill("legolink-64", &lego_stats);
  EXPECT_LT(max_diff(full, lego), 1e-4f);
  // Only the leading chunk is linked; everything after it is recomputed.
  EXPECT_EQ(lego_stats.linked, chunks_[0].len);
  EXPECT_EQ(lego_stats.recomputed, static_cast<int32_t>(prompt_.size()) - chunks_[0].len);
  const std::vector<float> blend = prefill("cacheblend-100");
  EXPECT_LT(max_diff(full, blend), 1e-4f);
  const std::vector<float> naive = prefill("naive", &naive_stats);
  EXPECT_GT(max_diff(full, naive), 1e-2f);
  EXPECT_EQ(naive_stats.recomputed, 4);  // the query only
  // LegoLink-2 recomputes 2 tokens of each non-leading chunk, plus the query.
  PicPrefillStats lego2;
  prefill("legolink-2", &lego2);
  EXPECT_EQ(lego2.recomputed, 2 * 2 + 4);
}

TEST_F(PicPrefillTest, CacheBlendProbeSeesDeviationOnlyWhereTheCacheIsInexact) {
  make_prompt();
  const int32_t n = static_cast<int32_t>(prompt_.size()) - 4;  // up to the query
  auto probe = [&](const std::vector<int32_t>& t) {
    model::Batch b;
    const int32_t seq = b.add_seq(t);
    for (int32_t p = 0; p < n; ++p) b.add(prompt_[static_cast<size_t>(p)], p, seq, false);
    std::vector<float> dev;
    EXPECT_TRUE(ctx_->value_deviation(b, *kv_, *ops_, 1, &dev).ok());
    return dev;
  };
  // An exact cache: the prompt computed in full.
  const std::vector<int32_t> exact = table(8);
  ASSERT_TRUE(compile_chunk(*ctx_, *kv_, *ops_, prompt_, exact).ok());
  const std::vector<float> d0 = probe(exact);
  EXPECT_LT(*std::max_element(d0.begin(), d0.end()), 1e-8f);
  // Linked naively: the leading chunk is exact, later chunks deviate.
  const std::vector<int32_t> linked = table(8);
  std::vector<float> logits;
  ASSERT_TRUE(pic_prefill(*model_, *ctx_, *kv_, *ops_, prompt_, chunks_, chunk_tables_, linked,
                          *kv::PicVariant::parse("naive"), &logits, nullptr)
                  .ok());
  const std::vector<float> d1 = probe(linked);
  float lead = 0, rest = 0;
  for (int32_t p = 0; p < n; ++p) {
    (p < chunks_[0].len ? lead : rest) = std::max(p < chunks_[0].len ? lead : rest, d1[p]);
  }
  EXPECT_LT(lead, 1e-8f);
  EXPECT_GT(rest, 1e-4f);
  EXPECT_FALSE(ctx_->value_deviation(model::Batch(), *kv_, *ops_, 99, &logits).ok());
}

}  // namespace
}  // namespace keel::engine
