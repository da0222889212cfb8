// Context::forward_early_exit on a tiny synthetic model: with no token exiting it equals forward()
// bit for bit (logits, hidden states and every KV byte); a token that exits reports its layer,
// stops the layer loop, and leaves no KV row unwritten (storage poisoned with NaN first: every row
// of every layer at the decoded positions is finite and later full-depth tokens attend to finite
// values); in a mixed batch the tokens that do not exit get exactly their logits of a plain pass;
// a may_exit of the wrong length is InvalidArgument.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "core/thread_pool.h"
#include "model/context.h"
#include "model/early_exit.h"
#include "test_util.h"
#include "tiny_model.h"

namespace keel::model::testing {
namespace {

constexpr int32_t kExitBlock = 4;

struct TinyFixture {
  TinyModel tiny;
  std::unique_ptr<Model> model;
  ThreadPool pool{1};
  kernels::Ops ops{test_isa(), &pool};
  TinyFixture() {
    TinySpec spec;
    spec.n_ctx = 64;
    spec.n_layer = 4;
    tiny = write_tiny_model(spec);
    auto m = Model::open(tiny.path);
    EXPECT_TRUE(m.ok()) << m.error().to_string();
    if (m.ok()) model = std::move(m).value();
  }
  KvStorage storage(bool poison) const {
    auto kv = KvStorage::create(KvLayout::for_model(model->hparams(), kExitBlock, DType::kF32), 16);
    EXPECT_TRUE(kv.ok());
    if (poison) {
      const float nan = std::nanf("");
      for (int32_t b = 0; b < kv->num_blocks(); ++b) {
        auto* f = reinterpret_cast<float*>(kv->block(b));
        std::fill(f, f + kv->layout().block_bytes() / sizeof(float), nan);
      }
    }
    return std::move(kv).value();
  }
};

std::vector<int32_t> table(int32_t first) {
  std::vector<int32_t> t(8);
  std::iota(t.begin(), t.end(), first);
  return t;
}

Batch one_seq(const std::vector<int32_t>& toks, int32_t start, const std::vector<int32_t>& tab) {
  Batch b;
  const int32_t s = b.add_seq(tab);
  for (size_t i = 0; i < toks.size(); ++i) {
    b.add(toks[i], start + static_cast<int32_t>(i), s, i + 1 == toks.size());
  }
  return b;
}

TEST(EarlyExitTest, NoExitEqualsForwardBitForBit) {
  TinyFixture s;
  ASSERT_NE(s.model, nullptr);
  KvStorage a = s.storage(false), b = s.storage(false);
  Context ca(*s.model, 16), cb(*s.model, 16);
  const std::vector<int32_t> toks = {1, 5, 9, 3, 7, 2, 8};
  std::vector<float> la, lb, ha, hb;
  for (size_t i = 0; i < toks.size(); ++i) {
    const Batch batch = one_seq({toks[i]}, static_cast<int32_t>(i), table(0));
    ASSERT_TRUE(ca.forward(batch, a, s.ops, &la, &ha).ok());
    EarlyExit ee;
    ee.may_exit = {1};
    int calls = 0;
    ee.decide = [&](int64_t, size_t, std::span<const float>) { return ++calls < 0; };
    ASSERT_TRUE(cb.forward_early_exit(batch, b, s.ops, &ee, &lb, &hb).ok());
    EXPECT_EQ(calls, s.model->hparams().n_layer - 1);  // every layer but the last
    EXPECT_EQ(ee.exit_layer,
              std::vector<int32_t>{static_cast<int32_t>(s.model->hparams().n_layer - 1)});
    EXPECT_EQ(la, lb);
    EXPECT_EQ(ha, hb);
  }
  EXPECT_EQ(std::memcmp(a.block(0), b.block(0), a.layout().block_bytes() * 2), 0);
}

TEST(EarlyExitTest, ExitedTokensLeaveNoKvRowUnwritten) {
  TinyFixture s;
  ASSERT_NE(s.model, nullptr);
  const int64_t n_layer = s.model->hparams().n_layer;
  ASSERT_GE(n_layer, 2);
  KvStorage kv = s.storage(/*poison=*/true);
  Context ctx(*s.model, 16);
  std::vector<float> logits, hidden;
  ASSERT_TRUE(ctx.forward(one_seq({1, 4, 6}, 0, table(0)), kv, s.ops, &logits).ok());
  for (int32_t pos = 3; pos < 9; ++pos) {  // decode: every token exits after layer 0
    EarlyExit ee;
    ee.may_exit = {1};
    ee.decide = [](int64_t il, size_t, std::span<const float>) { return il == 0; };
    ASSERT_TRUE(ctx.forward_early_exit(one_seq({pos % 7 + 1}, pos, table(0)), kv, s.ops, &ee,
                                       &logits, &hidden)
                    .ok());
    EXPECT_EQ(ee.exit_layer, std::vector<int32_t>{0});
    EXPECT_EQ(ee.layers_run, 1);
    for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  }
  std::vector<float> row(static_cast<size_t>(kv.layout().kv_dim));
  for (int32_t pos = 0; pos < 9; ++pos) {
    for (int64_t l = 0; l < n_layer; ++l) {
      for (const std::byte* r : {kv.k_row(pos / kExitBlock, l, pos % kExitBlock),
                                 kv.v_row(pos / kExitBlock, l, pos % kExitBlock)}) {
        kv.read_row(r, row.data());
        for (float x : row) ASSERT_TRUE(std::isfinite(x)) << "position " << pos << " layer " << l;
      }
    }
  }
  ASSERT_TRUE(ctx.forward(one_seq({3}, 9, table(0)), kv, s.ops, &logits).ok());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

TEST(EarlyExitTest, TokensThatDoNotExitAreUnchangedInAMixedBatch) {
  TinyFixture s;
  ASSERT_NE(s.model, nullptr);
  KvStorage a = s.storage(false), b = s.storage(false);
  Context ca(*s.model, 16), cb(*s.model, 16);
  std::vector<float> la, lb, h;
  // Two sequences (blocks 0.. and 8..), prefilled alike in both storages.
  for (KvStorage* kv : {&a, &b}) {
    Context& c = kv == &a ? ca : cb;
    ASSERT_TRUE(c.forward(one_seq({1, 2, 3}, 0, table(0)), *kv, s.ops, &la).ok());
    ASSERT_TRUE(c.forward(one_seq({1, 6, 5, 4}, 0, table(8)), *kv, s.ops, &la).ok());
  }
  Batch batch;
  const int32_t s0 = batch.add_seq(table(0)), s1 = batch.add_seq(table(8));
  batch.add(7, 3, s0, true);
  batch.add(9, 4, s1, true);
  ASSERT_TRUE(ca.forward(batch, a, s.ops, &la).ok());
  EarlyExit ee;
  ee.may_exit = {1, 0};
  ee.decide = [](int64_t il, size_t t, std::span<const float>) {
    EXPECT_EQ(t, 0u);
    return il == 0;
  };
  ASSERT_TRUE(cb.forward_early_exit(batch, b, s.ops, &ee, &lb, &h).ok());
  EXPECT_EQ(ee.exit_layer[0], 0);
  EXPECT_EQ(ee.exit_layer[1], s.model->hparams().n_layer - 1);
  const auto v = static_cast<size_t>(s.model->hparams().n_vocab);
  EXPECT_EQ(std::vector<float>(la.begin() + static_cast<ptrdiff_t>(v), la.end()),
            std::vector<float>(lb.begin() + static_cast<ptrdiff_t>(v), lb.end()));
  EXPECT_NE(std::vector<float>(la.begin(), la.begin() + static_cast<ptrdiff_t>(v)),
            std::vector<float>(lb.begin(), lb.begin() + static_cast<ptrdiff_t>(v)));
}

TEST(EarlyExitTest, MayExitOfTheWrongLengthIsRefused) {
  TinyFixture s;
  ASSERT_NE(s.model, nullptr);
  KvStorage kv = s.storage(false);
  Context ctx(*s.model, 16);
  EarlyExit ee;
  ee.may_exit = {1, 1};
  std::vector<float> logits;
  const Status st =
      ctx.forward_early_exit(one_seq({1}, 0, table(0)), kv, s.ops, &ee, &logits, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("may_exit"), std::string::npos);
}

}  // namespace
}  // namespace keel::model::testing
