// SparseSelector against direct computation on real KV rows (stories260K): the page summaries are
// the channel-wise min/max of the K rows the KV storage holds at the selection layer; the
// attention mass handed to the policy is the softmax of q·k / sqrt(d) over the attended positions,
// per query head with its KV head, summed per page and averaged over heads; prompt pages are
// marked; releases land in `pending` and `released` and leave the summaries; a new epoch starts
// the summaries over; prefill tokens are not selected for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "engine/sparse_decode.h"
#include "engine_test_util.h"
#include "model/context.h"

namespace keel::engine {
namespace {

constexpr int32_t kSparseBlock = 8;
constexpr int32_t kPrompt = 20;
constexpr int32_t kPos = 37;  // the decode token: pages 0..4, page 4 holds 32..37

class SparseDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KEEL_REQUIRE_SHARED();
    model_ = load_stories();
    ASSERT_NE(model_, nullptr);
    ops_ = std::make_unique<kernels::Ops>(kernels::best_isa(detect_cpu_features()), &pool_);
    model::Context ctx(*model_, 64);
    auto kv = model::KvStorage::create(
        model::KvLayout::for_model(model_->hparams(), kSparseBlock, DType::kF32), 8);
    ASSERT_TRUE(kv.ok());
    kv_ = std::make_unique<model::KvStorage>(std::move(kv).value());
    seq_.block_table = {3, 1, 4, 0, 5, 2};  // scattered on purpose
    model::Batch b;
    const int32_t s = b.add_seq(seq_.block_table);
    for (int32_t p = 0; p <= kPos; ++p) b.add(1 + (p * 11) % 300, p, s, false);
    ASSERT_TRUE(ctx.forward(b, *kv_, *ops_, nullptr).ok());
    const model::HParams& hp = model_->hparams();
    shape_ = {static_cast<int32_t>(hp.n_head), static_cast<int32_t>(hp.n_head_kv),
              static_cast<int32_t>(hp.head_dim)};
    q_.resize(static_cast<size_t>(hp.q_dim()));
    for (size_t i = 0; i < q_.size(); ++i) q_[i] = std::sin(0.37f * static_cast<float>(i)) * 2.0f;
  }
  std::vector<float> k_row(int32_t pos, int64_t layer) const {
    const model::KvLayout& l = kv_->layout();
    std::vector<float> out(static_cast<size_t>(l.kv_dim));
    std::memcpy(out.data(),
                kv_->k_row(seq_.block_table[static_cast<size_t>(pos / kSparseBlock)], layer,
                           pos % kSparseBlock),
                l.row_bytes());
    return out;
  }
  std::unique_ptr<SparseSequence> sequence(const char* policy, int32_t budget) {
    auto st = make_sparse_sequence({policy, budget}, sparse::SparseConfig{}, kSparseBlock, kPrompt);
    EXPECT_TRUE(st.ok());
    return st.ok() ? std::move(st).value() : nullptr;
  }
  std::vector<int32_t> select(SparseSequence* st, int32_t pos, int64_t layer, int32_t epoch = 0) {
    SparseSelector sel(model_->hparams());
    EXPECT_TRUE(sel.bind({{st, epoch}}));
    EXPECT_FALSE(SparseSelector(model_->hparams()).bind({{nullptr, 0}}));
    const int32_t positions[] = {pos};
    return sel.select(0, seq_, positions, q_, *kv_, layer);
  }

  ThreadPool pool_{1};
  std::unique_ptr<model::Model> model_;
  std::unique_ptr<kernels::Ops> ops_;
  std::unique_ptr<model::KvStorage> kv_;
  model::BatchSeq seq_;
  sparse::QueryShape shape_;
  std::vector<float> q_;
};

TEST_F(SparseDecodeTest, SummariesAreTheMinMaxOfTheStoredKeys) {
  auto st = sequence("quest", 1024);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(select(st.get(), kPos, 2), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  ASSERT_EQ(st->pages.size(), 5u);
  EXPECT_EQ(st->folded, kPos + 1);
  for (const sparse::PageSummary& page : st->pages) {
    const int32_t first = page.index * kSparseBlock, end = std::min(first + kSparseBlock, kPos + 1);
    EXPECT_EQ(page.num_tokens, end - first);
    EXPECT_EQ(page.prefill, first < kPrompt) << page.index;  // page 2 holds 16..23: prompt too
    for (size_t c = 0; c < page.k_min.size(); ++c) {
      float lo = INFINITY, hi = -INFINITY;
      for (int32_t p = first; p < end; ++p) {
        lo = std::min(lo, k_row(p, 2)[c]);
        hi = std::max(hi, k_row(p, 2)[c]);
      }
      ASSERT_EQ(page.k_min[c], lo) << page.index << " " << c;
      ASSERT_EQ(page.k_max[c], hi) << page.index << " " << c;
    }
  }
  // Prefill tokens are not selected for; a new epoch starts over.
  EXPECT_TRUE(select(st.get(), kPrompt - 1, 2).empty());
  st->released = {1};  // as if a page had been released under epoch 0
  select(st.get(), kPos, 2, /*epoch=*/1);
  EXPECT_EQ(st->epoch, 1);
  EXPECT_TRUE(st->released.empty());
  EXPECT_EQ(st->pages.size(), 5u);  // every page folded again
  EXPECT_EQ(st->step, 2);           // the policy's clock keeps running
}

TEST_F(SparseDecodeTest, AttentionMassIsTheSoftmaxPerPage) {
  auto st = sequence("h2o", 1024);  // observes the mass; a budget covering every page
  ASSERT_NE(st, nullptr);
  const int64_t layer = 3;
  ASSERT_EQ(select(st.get(), kPos, layer), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  // Direct: per head, softmax over positions 0..kPos of q_h · k_{kv(h)} / sqrt(d).
  const int32_t group = shape_.n_heads / shape_.n_kv_heads, d = shape_.head_dim;
  std::vector<double> want(5, 0.0);
  for (int32_t h = 0; h < shape_.n_heads; ++h) {
    std::vector<double> s;
    for (int32_t p = 0; p <= kPos; ++p) {
      const std::vector<float> k = k_row(p, layer);
      double dot = 0;
      for (int32_t c = 0; c < d; ++c) dot += double{q_[h * d + c]} * k[(h / group) * d + c];
      s.push_back(dot / std::sqrt(static_cast<double>(d)));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double v : s) z += std::exp(v - mx);
    for (int32_t p = 0; p <= kPos; ++p)
      want[p / kSparseBlock] += std::exp(s[p] - mx) / z / shape_.n_heads;
  }
  double total = 0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(st->pages[i].mass, want[i], 1e-5) << i;
    total += st->pages[i].mass;
  }
  EXPECT_NEAR(total, 1.0, 1e-5);
}

TEST_F(SparseDecodeTest, ReleasesLeaveTheSummariesAndWaitInPending) {
  auto st = sequence("streaming", 16);  // 2 pages: the sink page and the newest
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(select(st.get(), kPos, 2), (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(st->pending, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(st->released, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(st->pages_released_total, 3);
  ASSERT_EQ(st->pages.size(), 2u);
  EXPECT_EQ(st->held_pages(kPos + 3, kSparseBlock), (std::vector<int32_t>{0, 4, 5}));  // 5: new
  // The next step's batch seq: holes for the released pages, the held ones for early layers.
  model::BatchSeq next = seq_;
  st->prepare_decode(&next, kPos + 3, kSparseBlock);
  EXPECT_TRUE(next.select_pages);
  EXPECT_EQ(next.attend_pages, (std::vector<int32_t>{0, 4, 5}));
  EXPECT_EQ(next.block_table, (std::vector<int32_t>{3, model::kReleasedBlock, model::kReleasedBlock,
                                                    model::kReleasedBlock, 5, 2}));
}

}  // namespace
}  // namespace keel::engine
