// Sparse decode through Context: a sequence's attend_pages restrict attention to those pages.
// Listing every page gives the dense logits bit for bit; a subset gives other logits that do not
// depend on the excluded pages' contents (garbage there changes nothing) but do on the included
// ones; malformed page lists are refused; released (kReleasedBlock) pages are allowed only when
// not attended. A PageSelector at layer L sees the marked sequence's queries and K rows, and its
// pages apply from layer L on. Tiny synthetic model (no shared data needed).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "model/context.h"
#include "model/page_selector.h"
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
  // Decode logits at position 21 (page 5) attending `pages` (empty = dense), optionally with a
  // selector at `layer`.
  std::vector<float> decode(std::vector<int32_t> pages, PageSelector* selector = nullptr,
                            int64_t layer = 0) {
    Batch b;
    const int32_t seq = b.add_seq(table_);
    b.seqs[0].attend_pages = std::move(pages);
    b.seqs[0].select_pages = selector != nullptr;
    b.selector = selector;
    b.select_layer = layer;
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

// Returns fixed pages and records what it was shown.
class FixedSelector final : public PageSelector {
 public:
  explicit FixedSelector(std::vector<int32_t> pages) : pages_(std::move(pages)) {}
  std::vector<int32_t> select(int32_t seq, const BatchSeq&, std::span<const int32_t> positions,
                              std::span<const float> q, const KvStorage& kv,
                              int64_t layer) override {
    ++calls;
    seen_seq = seq;
    seen_layer = layer;
    seen_positions.assign(positions.begin(), positions.end());
    seen_q = std::vector<float>(q.begin(), q.end());
    // The row of position 21 at this layer is written already.
    std::memcpy(&row21_k0, kv.k_row(5, layer, 21 % kBlock), sizeof(float));
    return pages_;
  }
  std::vector<int32_t> pages_;
  int calls = 0;
  int32_t seen_seq = -1;
  int64_t seen_layer = -1;
  std::vector<int32_t> seen_positions;
  std::vector<float> seen_q;
  float row21_k0 = 0.0f;
};

TEST_F(SparseAttentionTest, ReleasedPagesAreAllowedOnlyWhenNotAttended) {
  const std::vector<float> sparse = decode({0, 3, 5});
  table_[1] = kReleasedBlock;
  table_[2] = kReleasedBlock;
  EXPECT_EQ(decode({0, 3, 5}), sparse);
  Batch b;
  const int32_t seq = b.add_seq(table_);
  b.add(9, 21, seq, true);  // dense over a hole: refused
  std::vector<float> logits;
  EXPECT_EQ(ctx_->forward(b, *kv_, *ops_, &logits).code(), StatusCode::kInvalidArgument);
  b.seqs[0].attend_pages = {0, 1, 5};  // an attended hole: refused
  EXPECT_EQ(ctx_->forward(b, *kv_, *ops_, &logits).code(), StatusCode::kInvalidArgument);
}

TEST_F(SparseAttentionTest, SelectorPagesApplyFromItsLayerOn) {
  const int64_t n_layer = model_->hparams().n_layer;
  ASSERT_GE(n_layer, 2);
  // At layer 0 the selector's pages are every layer's: the static list's logits.
  FixedSelector at0({0, 3, 5});
  EXPECT_EQ(decode({}, &at0, 0), decode({0, 3, 5}));
  EXPECT_EQ(at0.calls, 1);
  EXPECT_EQ(at0.seen_seq, 0);
  EXPECT_EQ(at0.seen_layer, 0);
  EXPECT_EQ(at0.seen_positions, std::vector<int32_t>{21});
  EXPECT_EQ(at0.seen_q.size(), static_cast<size_t>(model_->hparams().q_dim()));
  EXPECT_NE(at0.row21_k0, 0.0f);
  // Every page at any layer: dense. A subset from layer 1: neither dense nor the all-layer subset.
  FixedSelector all({0, 1, 2, 3, 4, 5});
  EXPECT_EQ(decode({}, &all, 1), decode({}));
  FixedSelector at1({0, 3, 5});
  const std::vector<float> later = decode({}, &at1, 1);
  EXPECT_EQ(at1.seen_layer, 1);
  EXPECT_NE(later, decode({}));
  EXPECT_NE(later, decode({0, 3, 5}));
  // Empty keeps the sequence's own list.
  FixedSelector keep({});
  EXPECT_EQ(decode({0, 3, 5}, &keep, 0), decode({0, 3, 5}));
}

TEST_F(SparseAttentionTest, SelectorChoosingAReleasedPageAborts) {
  table_[2] = kReleasedBlock;
  FixedSelector bad({0, 2, 5});
  EXPECT_DEATH(decode({0, 1, 3, 4, 5}, &bad, 0), "outside the held block table");
}

}  // namespace
}  // namespace keel::model::testing
