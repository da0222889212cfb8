// Sparse decode through Context: a sequence's attend_pages restrict attention to those pages.
// Listing every page gives the dense logits bit for bit; a subset gives other logits that do not
// depend on the excluded pages' contents (garbage there changes nothing) but do on the included
// ones; malformed page lists are refused. Tiny synthetic model (no shared data needed).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "model/context.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

constexpr int32_t kBlock = 4;

class SparseAttentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TinySpec spec;
    spec.n_ctx = 64;
    tiny_ = write_tiny_model(spec);
    auto m = Model::open(tiny_.path);
    ASSERT_TRUE(m.ok()) << m.error().to_string();
    model_ = std::move(m).value();
    ops_ = std::make_unique<kernels::Ops>(kernels::best_isa(detect_cpu_features()), &pool_);
    ctx_ = std::make_unique<Context>(*model_, 64);
    auto kv = KvStorage::create(KvLayout::for_model(model_->hparams(), kBlock, DType::kF32), 16);
    ASSERT_TRUE(kv.ok());
    kv_ = std::make_unique<KvStorage>(std::move(kv).value());
    table_.resize(16);
    std::iota(table_.begin(), table_.end(), 0);
    // Prefill 21 tokens: pages 0..4 full, page 5 holds position 20.
    Batch b;
    const int32_t seq = b.add_seq(table_);
    for (int32_t p = 0; p < 21; ++p) b.add(1 + (p * 7) % 37, p, seq, false);
    ASSERT_TRUE(ctx_->forward(b, *kv_, *ops_, nullptr).ok());
  }
  // Decode logits at position 21 (page 5) attending `pages` (empty = dense).
  std::vector<float> decode(std::vector<int32_t> pages) {
    Batch b;
    const int32_t seq = b.add_seq(table_);
    b.seqs[0].attend_pages = std::move(pages);
    b.add(9, 21, seq, true);
    std::vector<float> logits;
    const Status st = ctx_->forward(b, *kv_, *ops_, &logits);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return logits;
  }
  void scribble(int32_t block) {
    std::memset(kv_->block(block), 0x41, kv_->layout().block_bytes());
  }

  TinyModel tiny_;
  ThreadPool pool_{1};
  std::unique_ptr<Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  std::unique_ptr<Context> ctx_;
  std::unique_ptr<KvStorage> kv_;
  std::vector<int32_t> table_;
};

TEST_F(SparseAttentionTest, EveryPageIsDense) {
  const std::vector<float> dense = decode({});
  EXPECT_EQ(decode({0, 1, 2, 3, 4, 5}), dense);
}

TEST_F(SparseAttentionTest, OnlyTheListedPagesMatter) {
  const std::vector<float> dense = decode({});
  const std::vector<float> sparse = decode({0, 3, 5});
  EXPECT_NE(sparse, dense);
  scribble(1);  // excluded pages: no effect
  scribble(2);
  scribble(4);
  EXPECT_EQ(decode({0, 3, 5}), sparse);
  scribble(3);  // an included page: an effect
  EXPECT_NE(decode({0, 3, 5}), sparse);
}

TEST_F(SparseAttentionTest, MalformedPageListsAreRefused) {
  for (const std::vector<int32_t>& pages :
       {std::vector<int32_t>{0, 3}, std::vector<int32_t>{3, 0, 5}, std::vector<int32_t>{0, 0, 5},
        std::vector<int32_t>{-1, 5}, std::vector<int32_t>{0, 17}}) {
    Batch b;
    const int32_t seq = b.add_seq(table_);
    b.seqs[0].attend_pages = pages;
    b.add(9, 21, seq, true);
    std::vector<float> logits;
    EXPECT_EQ(ctx_->forward(b, *kv_, *ops_, &logits).code(), StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace keel::model::testing
