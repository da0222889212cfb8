// The page selection policies on synthetic page summaries: dense attends everything; StreamingLLM
// keeps sinks and the recent window and releases the middle; H2O keeps the heaviest pages and the
// window; Quest attends the pages whose keys align with q and never releases; RaaS keeps every
// prefill page, attends the best-scoring decode pages and the newest, and — over a long simulated
// generation — never holds more than its prefill pages + budget/page_size decode pages, while a
// page it keeps attending (timestamp refreshed above alpha) survives. Bad names and configs are
// refused.
#include "sparse/sparse_policy.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace keel::sparse {
namespace {

constexpr QueryShape kShape{.n_heads = 1, .n_kv_heads = 1, .head_dim = 2};

// A full page whose keys all equal (x, y).
PageSummary page(int32_t index, float x, float y, bool prefill = false) {
  PageSummary p;
  p.index = index;
  p.prefill = prefill;
  p.last_attended = index;
  const std::vector<float> k = {x, y};
  for (int i = 0; i < 16; ++i) p.add_key(k);
  return p;
}

std::unique_ptr<SparsePolicy> policy(const char* name, SparseConfig c = {}) {
  auto p = make_policy(name, c);
  EXPECT_TRUE(p.ok()) << name;
  return p.ok() ? std::move(p).value() : nullptr;
}

bool has(const std::vector<int32_t>& v, int32_t x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

TEST(SparsePolicyTest, DenseAttendsEveryPage) {
  std::vector<PageSummary> pages;
  for (int i = 0; i < 5; ++i) pages.push_back(page(i, 0, 0));
  const PageChoice c = policy("dense")->select(pages, {});
  EXPECT_EQ(c.attend, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(c.release.empty());
}

TEST(SparsePolicyTest, StreamingKeepsSinksAndTheWindow) {
  SparseConfig cfg;
  cfg.sink_tokens = 4;
  cfg.window_tokens = 32;  // 2 pages
  std::vector<PageSummary> pages;
  for (int i = 0; i < 10; ++i) pages.push_back(page(i, 0, 0));
  const PageChoice c = policy("streaming", cfg)->select(pages, {});
  EXPECT_EQ(c.attend, (std::vector<int32_t>{0, 8, 9}));
  EXPECT_EQ(c.release, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(SparsePolicyTest, WindowFollowsTheBudgetUnlessGiven) {
  SparseConfig cfg;  // page 16, budget 1024, sink 4, window 0 = from the budget
  EXPECT_EQ(cfg.window_pages("streaming"), 64 - 1);  // the budget's pages but the sink page
  EXPECT_EQ(cfg.window_pages("h2o"), 32);            // half the budget's pages
  cfg.window_tokens = 40;
  EXPECT_EQ(cfg.window_pages("streaming"), 3);
  EXPECT_EQ(cfg.window_pages("h2o"), 3);
  cfg.budget = 64;
  cfg.window_tokens = 0;
  std::vector<PageSummary> pages;
  for (int i = 0; i < 10; ++i) pages.push_back(page(i, 0, 0));
  // Streaming at L = 64 (4 pages): the sink page plus 3 window pages.
  EXPECT_EQ(policy("streaming", cfg)->select(pages, {}).attend, (std::vector<int32_t>{0, 7, 8, 9}));
}

TEST(SparsePolicyTest, H2OKeepsHeavyHittersAndTheWindow) {
  SparseConfig cfg;
  cfg.budget = 64;         // 4 pages
  cfg.window_tokens = 16;  // 1 page
  std::vector<PageSummary> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(page(i, 0, 0));
  pages[2].mass = 5;
  pages[5].mass = 3;
  pages[6].mass = 4;
  pages[1].mass = 1;
  const PageChoice c = policy("h2o", cfg)->select(pages, {});
  EXPECT_EQ(c.attend, (std::vector<int32_t>{2, 5, 6, 7}));
  EXPECT_EQ(c.release, (std::vector<int32_t>{0, 1, 3, 4}));
  // observe() accumulates mass.
  auto h2o = policy("h2o", cfg);
  const std::vector<int32_t> attended = {0, 3};
  const std::vector<float> prob = {0.25f, 0.5f};
  h2o->observe(pages, attended, prob, 1);
  EXPECT_DOUBLE_EQ(pages[0].mass, 0.25);
  EXPECT_DOUBLE_EQ(pages[3].mass, 0.5);
}

TEST(SparsePolicyTest, QuestAttendsAlignedPagesAndKeepsEverything) {
  SparseConfig cfg;
  cfg.budget = 48;  // 3 pages: the 2 best older pages + the newest
  std::vector<PageSummary> pages;
  for (int i = 0; i < 8; ++i) pages.push_back(page(i, -1, 0));
  pages[1] = page(1, 3, 0);
  pages[4] = page(4, 2, 0);
  const std::vector<float> q = {1, 0};
  const PageChoice c = policy("quest", cfg)->select(pages, {q, kShape, 10});
  EXPECT_EQ(c.attend, (std::vector<int32_t>{1, 4, 7}));
  EXPECT_TRUE(c.release.empty());
}

TEST(SparsePolicyTest, RaasMemoryStaysBoundedAndRefreshedPagesSurvive) {
  SparseConfig cfg;
  cfg.budget = 64;  // 4 decode pages
  cfg.alpha = 0.1f;
  auto raas = policy("raas", cfg);
  std::vector<PageSummary> pages;
  for (int i = 0; i < 3; ++i) pages.push_back(page(i, 0, 1, /*prefill=*/true));
  const std::vector<float> q = {1, 0};
  size_t max_decode_held = 0;
  for (int32_t step = 0; step < 200; ++step) {
    const int32_t idx = 3 + step;
    // Page 5 holds a "milestone" key aligned with q; others are orthogonal or opposed.
    pages.push_back(page(idx, idx == 5 ? 4.0f : -1.0f, 0));
    pages.back().last_attended = step;
    const PageChoice c = raas->select(pages, {q, kShape, step});
    for (int32_t p = 0; p < 3; ++p) EXPECT_TRUE(has(c.attend, p)) << "prefill page " << p;
    EXPECT_TRUE(has(c.attend, idx)) << "newest page";
    for (int32_t r : c.release) {
      EXPECT_FALSE(has(c.attend, r));
      EXPECT_GE(r, 3) << "a prefill page was released";
    }
    std::erase_if(pages, [&](const PageSummary& p) { return has(c.release, p.index); });
    // Attention finds the milestone page significant every step: its timestamp is refreshed.
    std::vector<float> prob;
    for (int32_t a : c.attend) prob.push_back(a == 5 ? 0.5f : 0.01f);
    raas->observe(pages, c.attend, prob, step);
    size_t decode = 0;
    for (const PageSummary& p : pages) decode += p.prefill ? 0 : 1;
    max_decode_held = std::max(max_decode_held, decode);
  }
  EXPECT_LE(max_decode_held, 4u + 1u);  // budget pages, plus the newest before a release
  EXPECT_TRUE(std::any_of(pages.begin(), pages.end(), [](const PageSummary& p) {
    return p.index == 5;
  })) << "the refreshed milestone page was released";
  EXPECT_EQ(
      std::count_if(pages.begin(), pages.end(), [](const PageSummary& p) { return p.prefill; }), 3);
}

TEST(SparsePolicyTest, BadNamesAndConfigsAreRefused) {
  EXPECT_FALSE(make_policy("lru", {}).ok());
  SparseConfig bad;
  bad.budget = 8;  // below one page
  EXPECT_FALSE(make_policy("raas", bad).ok());
  bad = {};
  bad.alpha = 2.0f;
  EXPECT_FALSE(make_policy("raas", bad).ok());
  for (const char* name : {"dense", "streaming", "h2o", "quest", "raas"}) {
    auto p = make_policy(name, {});
    ASSERT_TRUE(p.ok());
    EXPECT_EQ((*p)->name(), name);
  }
}

}  // namespace
}  // namespace keel::sparse
