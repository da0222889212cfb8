// Replicated hot experts without processes: ExpertPlacement's checks and each shard's part, the
// per-step slot assignment (owners for single copies, the least-loaded copy otherwise, the same
// answer every time), the replica plan over skewed and even counts, and the reader of a /metrics
// scrape's expert counts.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "ep/expert_counts_text.h"
#include "ep/replica_plan.h"
#include "model/expert_placement.h"

namespace keel::ep {
namespace {

using model::ExpertPlacement;
using model::ExpertReplica;

TEST(ExpertPlacementTest, ChecksReplicasAndGivesEachShardItsPart) {
  // 2 layers, 8 experts, 2 shards: shard 0 owns 0-3, shard 1 owns 4-7.
  auto p = ExpertPlacement::make(2, 2, 8, {{1, 2, 1}, {0, 6, 0}, {0, 1, 1}});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->holders(0, 1), 0b11u);
  EXPECT_EQ(p->holders(0, 2), 0b01u);
  EXPECT_EQ(p->holders(0, 6), 0b11u);
  EXPECT_EQ(p->holders(1, 6), 0b10u);
  const model::ExpertShard s0 = p->shard(0), s1 = p->shard(1);
  EXPECT_FALSE(s0.experts_only);
  EXPECT_TRUE(s1.experts_only);
  EXPECT_EQ(s0.replicas, (std::vector<std::pair<int32_t, int32_t>>{{0, 6}}));
  EXPECT_EQ(s1.replicas, (std::vector<std::pair<int32_t, int32_t>>{{0, 1}, {1, 2}}));
  EXPECT_TRUE(s1.validate().ok());
  EXPECT_TRUE(s1.holds(1, 2, 8));
  EXPECT_FALSE(s1.holds(0, 2, 8));
  EXPECT_TRUE(s1.holds(0, 7, 8));

  EXPECT_FALSE(ExpertPlacement::make(2, 2, 8, {{0, 5, 1}}).ok());             // its owner
  EXPECT_FALSE(ExpertPlacement::make(2, 2, 8, {{0, 1, 1}, {0, 1, 1}}).ok());  // twice
  EXPECT_FALSE(ExpertPlacement::make(2, 2, 8, {{2, 1, 1}}).ok());             // no layer 2
  EXPECT_FALSE(ExpertPlacement::make(2, 2, 8, {{0, 8, 1}}).ok());             // no expert 8
  EXPECT_FALSE(ExpertPlacement::make(2, 2, 8, {{0, 1, 2}}).ok());             // no shard 2
  EXPECT_FALSE(ExpertPlacement::make(65, 2, 8, {}).ok());
  const model::ExpertShard unsorted{1, 2, true, {{1, 0}, {0, 0}}};
  EXPECT_FALSE(unsorted.validate().ok());
}

TEST(ExpertPlacementTest, SlotsGoToOwnersOrTheLeastLoadedCopyTheSameEveryTime) {
  auto p = ExpertPlacement::make(2, 1, 8, {{0, 5, 0}});  // expert 5 on both shards
  ASSERT_TRUE(p.ok());
  // Shard 1 already has three single-copy slots (4, 6, 7); expert 5's four slots even it out.
  const std::vector<int32_t> experts = {4, 5, 6, 5, 0, 7, 5, 5};
  std::vector<int32_t> shard(experts.size(), -1), again(experts.size(), -1);
  std::vector<int64_t> load(2);
  std::vector<int32_t> pending;
  model::assign_slots(*p, 0, experts, shard, load, pending);
  EXPECT_EQ(shard[0], 1);
  EXPECT_EQ(shard[2], 1);
  EXPECT_EQ(shard[4], 0);
  EXPECT_EQ(shard[5], 1);
  EXPECT_EQ(load[0] + load[1], 8);
  EXPECT_EQ(load[0], 4);  // 1 own + 3 of expert 5's four
  EXPECT_EQ(load[1], 4);
  for (size_t i = 0; i < experts.size(); ++i) {
    EXPECT_NE(p->holders(0, experts[i]) >> shard[i] & 1, 0u) << "slot " << i;
  }
  model::assign_slots(*p, 0, experts, again, load, pending);
  EXPECT_EQ(again, shard);
}

// Zipf-like counts: expert e of a layer gets about 1/(e+1) of the tokens, the hot ones all in
// shard 0's range.
std::vector<int64_t> skewed(int64_t n_layer, int64_t n_expert) {
  std::vector<int64_t> c(static_cast<size_t>(n_layer * n_expert));
  for (int64_t l = 0; l < n_layer; ++l) {
    for (int64_t e = 0; e < n_expert; ++e)
      c[static_cast<size_t>(l * n_expert + e)] = 12000 / (e + 1);
  }
  return c;
}

TEST(ReplicaPlanTest, SkewedCountsGetTheirHotExpertsCopiedAndTheLoadEvensOut) {
  const int64_t n_layer = 3, n_expert = 16;
  const std::vector<int64_t> counts = skewed(n_layer, n_expert);
  auto none = plan_replicas({n_layer, n_expert, counts, 4, 0});
  auto plan = plan_replicas({n_layer, n_expert, counts, 4, 2});
  ASSERT_TRUE(none.ok() && plan.ok()) << plan.status().to_string();
  EXPECT_TRUE(none->replicas().empty());
  ASSERT_FALSE(plan->replicas().empty());
  for (int64_t l = 0; l < n_layer; ++l) {
    const double before = shard_imbalance(*none, counts, l);
    const double after = shard_imbalance(*plan, counts, l);
    EXPECT_GT(before, 2.0) << "layer " << l;  // shard 0 holds experts 0-3: most of the tokens
    EXPECT_LT(after, before * 0.7) << "layer " << l;
    for (int32_t s = 0; s < 4; ++s) {  // at most 2 copies per shard and layer
      const auto n =
          std::count_if(plan->replicas().begin(), plan->replicas().end(),
                        [&](const ExpertReplica& r) { return r.layer == l && r.shard == s; });
      EXPECT_LE(n, 2) << "layer " << l << " shard " << s;
    }
  }
  // The hottest expert is copied; the coldest is not.
  EXPECT_GT(std::popcount(plan->holders(0, 0)), 1);
  EXPECT_EQ(std::popcount(plan->holders(0, 15)), 1);
  // Deterministic.
  auto again = plan_replicas({n_layer, n_expert, counts, 4, 2});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->replicas(), plan->replicas());
}

TEST(ReplicaPlanTest, EvenCountsNeedNoCopiesAndBadInputIsRefused) {
  const std::vector<int64_t> even(2 * 8, 100);
  auto plan = plan_replicas({2, 8, even, 2, 3});
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->replicas().empty());  // no copy lowers the busiest shard's load
  EXPECT_FALSE(plan_replicas({2, 8, std::span(even).first(15), 2, 1}).ok());
  EXPECT_FALSE(plan_replicas({2, 8, even, 2, -1}).ok());
  std::vector<int64_t> negative = even;
  negative[3] = -1;
  EXPECT_FALSE(plan_replicas({2, 8, negative, 2, 1}).ok());
}

TEST(ExpertCountsTextTest, ReadsAMetricsScrapeAndSumsModels) {
  const std::string text =
      "# HELP keel:moe_expert_tokens_total tokens routed\n"
      "# TYPE keel:moe_expert_tokens_total counter\n"
      "keel:moe_expert_tokens_total{model_name=\"a \\\"b\\\"\",layer=\"0\",expert=\"0\"} 5\n"
      "keel:moe_expert_tokens_total{model_name=\"a\",layer=\"1\",expert=\"2\"} 7\r\n"
      "keel:moe_expert_tokens_total{model_name=\"c\",layer=\"1\",expert=\"2\"} 3\n"
      "keel:num_requests_running{model_name=\"a\"} 1\n"
      "keel:moe_expert_tokens_total_other{layer=\"9\",expert=\"9\"} 1\n";
  auto g = parse_expert_counts(text);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->n_layer, 2);
  EXPECT_EQ(g->n_expert, 3);
  EXPECT_EQ(g->counts, (std::vector<int64_t>{5, 0, 0, 0, 0, 10}));
}

TEST(ExpertCountsTextTest, MalformedLinesAreRefusedByLine) {
  auto none = parse_expert_counts("keel:num_requests_running 1\n");
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  for (const char* bad : {"keel:moe_expert_tokens_total{layer=\"0\"} 5\n",
                          "keel:moe_expert_tokens_total{layer=\"0\",expert=\"x\"} 5\n",
                          "keel:moe_expert_tokens_total{layer=\"0\",expert=\"1\"} -5\n",
                          "keel:moe_expert_tokens_total{layer=\"0\",expert=\"1\"} 1.5e3\n",
                          "keel:moe_expert_tokens_total{layer=\"0\",expert=\"99999\"} 5\n",
                          "keel:moe_expert_tokens_total{layer=\"0\",expert=\"1} 5\n"}) {
    auto g = parse_expert_counts(std::string("\n") + bad);
    EXPECT_EQ(g.status().code(), StatusCode::kCorrupt) << bad;
    EXPECT_NE(g.status().message().find("line 2"), std::string::npos) << g.status().to_string();
  }
  EXPECT_EQ(read_expert_counts("/nonexistent/counts.prom").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace keel::ep
