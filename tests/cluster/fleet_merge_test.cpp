// The fleet over several JEs: TEs once (a TE only a later JE lists is added), the JEs' job, router
// and predictor counters summed, one summary per JE — a JE that does not answer listed as down
// with why — and Unavailable naming every JE when none answers.
#include "cluster/gateway/fleet_merge.h"
#include "cluster/gateway/fleet_metrics.h"

#include <gtest/gtest.h>

namespace keel::cluster {
namespace {

TeInfo merged_te(std::string id) {
  TeInfo t;
  t.id = id;
  t.address = "127.0.0.1:" + std::to_string(7000 + id.back());
  t.model = "m";
  return t;
}

FleetStatus je_answer(std::string id, std::vector<TeInfo> tes, int64_t total, int64_t locality) {
  FleetStatus s;
  s.je_id = std::move(id);
  for (TeInfo& t : tes) {
    engine::EngineStats stats;
    stats.generation_tokens_total = 10;
    s.stats.push_back(stats);
    s.metrics.emplace_back();
    s.fleet.tes.push_back(std::move(t));
  }
  s.jobs_total = total;
  s.jobs_active = 1;
  s.jobs_redriven = 2;
  s.jobs_failed = 0;
  s.jobs_resubmitted = 1;
  s.max_model_len = 512;
  s.router = Json{{"locality", locality}, {"least_load", 1}, {"no_capacity", 0}};
  s.predictor = Json{{"requests", total}, {"seconds", 0.5}, {"buckets", {{0, 1, total}}}};
  return s;
}

TEST(FleetMergeTest, TwoJesSumTheirCountersAndListTheTesOnce) {
  std::vector<JeAnswer> answers;
  answers.push_back(
      {"127.0.0.1:9000", "", je_answer("je-0", {merged_te("te-0"), merged_te("te-1")}, 16, 10)});
  answers.push_back(
      {"127.0.0.1:9001", "", je_answer("je-1", {merged_te("te-0"), merged_te("te-1")}, 16, 12)});
  Result<FleetStatus> m = merge_fleet_statuses(answers);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->fleet.tes.size(), 2u);  // not 4: the same TEs seen by both
  EXPECT_EQ(m->stats.size(), 2u);
  EXPECT_EQ(m->metrics.size(), 2u);
  EXPECT_EQ(m->jobs_total, 32);
  EXPECT_EQ(m->jobs_active, 2);
  EXPECT_EQ(m->jobs_redriven, 4);
  EXPECT_EQ(m->jobs_resubmitted, 2);
  EXPECT_EQ(m->router["locality"].get<int64_t>(), 22);
  EXPECT_EQ(m->router["least_load"].get<int64_t>(), 2);
  EXPECT_EQ(m->predictor["requests"].get<int64_t>(), 32);
  EXPECT_DOUBLE_EQ(m->predictor["seconds"].get<double>(), 1.0);
  EXPECT_EQ(m->predictor["buckets"], Json::array({{0, 1, 32}}));
  EXPECT_EQ(m->je_id, "je-0,je-1");
  EXPECT_EQ(m->max_model_len, 512);
  ASSERT_EQ(m->job_executors.size(), 2u);
  EXPECT_EQ(m->job_executors[1].id, "je-1");
  EXPECT_TRUE(m->job_executors[1].up);
  EXPECT_EQ(m->job_executors[1].jobs_total, 16);
  EXPECT_EQ(m->job_executors[1].router["locality"].get<int64_t>(), 12);
  EXPECT_EQ(describe_down_jes(m->job_executors), "");
}

TEST(FleetMergeTest, ADownJeIsListedWithWhyAndATeOnlyALaterJeKnowsIsAdded) {
  std::vector<JeAnswer> answers;
  answers.push_back({"127.0.0.1:9000", "je-0", Status::unavailable("link closed")});
  answers.push_back({"127.0.0.1:9001", "", je_answer("je-1", {merged_te("te-0")}, 3, 1)});
  answers.push_back(
      {"127.0.0.1:9002", "", je_answer("je-2", {merged_te("te-0"), merged_te("te-2")}, 4, 2)});
  Result<FleetStatus> m = merge_fleet_statuses(answers);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->fleet.tes.size(), 2u);
  EXPECT_EQ(m->fleet.tes[1].id, "te-2");
  EXPECT_EQ(m->stats[1].generation_tokens_total, 10);
  EXPECT_EQ(m->jobs_total, 7);
  ASSERT_EQ(m->job_executors.size(), 3u);
  EXPECT_FALSE(m->job_executors[0].up);
  EXPECT_EQ(m->job_executors[0].id, "je-0");  // the id it last gave
  EXPECT_EQ(describe_down_jes(m->job_executors), "je-0 (127.0.0.1:9000): link closed");
}

// The TEs' per-expert counts of one model are summed; a TE of another shape is left out.
TEST(FleetMergeTest, ExpertTokensAreSummedOverTesOfOneShape) {
  engine::MetricsSnapshot a, b, other, dense;
  a.moe_expert_tokens = engine::ExpertTokens{1, 2, {3, 4}};
  b.moe_expert_tokens = engine::ExpertTokens{1, 2, {10, 0}};
  other.moe_expert_tokens = engine::ExpertTokens{2, 2, {1, 1, 1, 1}};
  const engine::MetricsSnapshot sum = merge_metrics({dense, a, other, b});
  ASSERT_TRUE(sum.moe_expert_tokens.has_value());
  EXPECT_EQ(sum.moe_expert_tokens->tokens, (std::vector<int64_t>{13, 4}));
  EXPECT_FALSE(merge_metrics({dense, dense}).moe_expert_tokens.has_value());
}

// The gateway's keel_tenant_vtc_counter: each tenant's virtual token counters summed over the
// TEs (a tenant one TE has not served counts 0 there).
TEST(FleetMergeTest, TenantsVirtualTokenCountersAreSummedOverTes) {
  engine::EngineStats a, b;
  a.tenant_vtc = {{"alice", 120.0}, {"bob", 30.0}};
  b.tenant_vtc = {{"alice", 5.5}};
  const engine::EngineStats sum = merge_stats({a, b});
  EXPECT_EQ(sum.tenant_vtc, (std::map<std::string, double>{{"alice", 125.5}, {"bob", 30.0}}));
}

TEST(FleetMergeTest, NoJeAnsweringIsUnavailableNamingThem) {
  std::vector<JeAnswer> answers;
  answers.push_back({"127.0.0.1:9000", "je-0", Status::unavailable("link closed")});
  answers.push_back({"127.0.0.1:9001", "", Status::unavailable("no reply within 10000 ms")});
  Result<FleetStatus> m = merge_fleet_statuses(answers);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(m.status().message().find("je-0 (127.0.0.1:9000): link closed"), std::string::npos)
      << m.status().message();
  EXPECT_NE(m.status().message().find("127.0.0.1:9001: no reply"), std::string::npos);
  EXPECT_FALSE(merge_fleet_statuses({}).ok());
}

}  // namespace
}  // namespace keel::cluster
