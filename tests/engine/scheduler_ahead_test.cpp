// Scheduler schedule-ahead tests: a plan for step N+1 made before update(N) uses placeholders for
// N's samples; resolve_plan() fills them; a request finished after N never appears in a later
// plan and, if it is in an already-made plan, its result is discarded (both orders); a request
// preempted while a sample of it is in flight keeps that token; update() order is enforced.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

const kv::BlockHash kAheadExtra = kv::request_extra_key(kv::BlockHash{5, 6}, "");

class SchedulerAheadTest : public ::testing::Test {
 protected:
  void SetUp() override { init(64); }
  void init(int32_t num_blocks, int32_t max_seqs = 8) {
    sc_ = SchedulerConfig{max_seqs, 64, 256, 0};
    kv_ = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{num_blocks, 4, true});
    sched_ = std::make_unique<Scheduler>(sc_, kv_.get());
  }
  StepPlan schedule() {
    StepPlan plan = sched_->schedule();
    testing::expect_valid_plan(plan, sc_, 4);
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
    return plan;
  }
  static std::vector<SeqResult> results(const StepPlan& plan, int32_t token) {
    std::vector<SeqResult> out;
    for (const ScheduledSeq& s : plan.seqs) {
      if (s.samples) out.push_back(SeqResult{s.key, token});
    }
    return out;
  }
  void update(const StepPlan& plan, int32_t token) {
    sched_->update(plan, results(plan, token));
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  }

  SchedulerConfig sc_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

// A request added while step N computes joins plan N+1 (made ahead) through extend_plan(),
// within that plan's leftover token budget and the prefill budget of a step that decodes; the
// extended plan updates like any other, and a plan that preempted is not extended.
TEST_F(SchedulerAheadTest, ExtendPlanAdmitsRequestsThatArrivedMeanwhile) {
  sched_->set_prefill_budget(10);
  sched_->add(1, {10, 11, 12, 13, 14}, 4, kAheadExtra);
  StepPlan n0 = schedule();
  StepPlan n1 = schedule();  // made ahead: request 1 decodes
  sched_->add(2, Tokens(30, 7), 4, kAheadExtra);
  update(n0, 99);
  sched_->resolve_plan(&n1);
  sched_->extend_plan(&n1);
  testing::expect_valid_plan(n1, sc_, 4);
  ASSERT_EQ(n1.seqs.size(), 2u);
  EXPECT_EQ(n1.seqs[1].key, 2);
  EXPECT_EQ(n1.seqs[1].num_tokens, 10);  // the prefill budget, as the step also decodes
  EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  StepPlan n2 = schedule();
  update(n1, 98);
  sched_->resolve_plan(&n2);
  update(n2, 97);
  EXPECT_EQ(sched_->find(2)->num_computed, 20);
  StepPlan again = schedule();
  sched_->extend_plan(&again);  // nothing waits: unchanged
  EXPECT_EQ(again.seqs.size(), 2u);
  update(again, 96);
}

TEST_F(SchedulerAheadTest, NextPlanUsesPlaceholdersUntilResolved) {
  sched_->add(1, {10, 11, 12, 13, 14}, 4, kAheadExtra);
  StepPlan n0 = schedule();
  StepPlan n1 = schedule();  // before update(n0)
  ASSERT_EQ(n1.seqs.size(), 1u);
  EXPECT_EQ(n1.step_id, 1);
  EXPECT_EQ(n1.seqs[0].start_pos, 5);
  EXPECT_EQ(n1.seqs[0].num_tokens, 1);
  EXPECT_TRUE(n1.seqs[0].samples);
  EXPECT_EQ(n1.seqs[0].tokens, (Tokens{kPlaceholderToken}));
  EXPECT_EQ(sched_->find(1)->num_pending_samples, 2);

  update(n0, 20);
  sched_->resolve_plan(&n1);
  EXPECT_EQ(n1.seqs[0].tokens, (Tokens{20}));
  StepPlan n2 = schedule();  // before update(n1)
  ASSERT_EQ(n2.seqs.size(), 1u);
  EXPECT_EQ(n2.seqs[0].start_pos, 6);
  EXPECT_EQ(n2.seqs[0].tokens, (Tokens{kPlaceholderToken}));
  update(n1, 21);
  sched_->resolve_plan(&n2);
  EXPECT_EQ(n2.seqs[0].tokens, (Tokens{21}));
  const RequestState* r = sched_->find(1);
  EXPECT_EQ(r->tokens, (Tokens{10, 11, 12, 13, 14, 20, 21}));
  EXPECT_EQ(r->num_computed, 6);
  EXPECT_EQ(r->num_scheduled, 7);
  EXPECT_EQ(r->num_pending_samples, 1);
}

TEST_F(SchedulerAheadTest, AheadPlanStopsAtMaxTokens) {
  sched_->add(1, {1, 2, 3}, 1, kAheadExtra);
  StepPlan n0 = schedule();
  StepPlan n1 = schedule();  // the pending sample is the last allowed token
  EXPECT_TRUE(n1.empty());
  update(n0, 9);
  update(n1, 0);
  EXPECT_TRUE(schedule().empty());  // done, waiting for finish()
}

TEST_F(SchedulerAheadTest, FinishedBeforeTheNextPlanNeverAppears) {
  sched_->add(1, {1, 2, 3}, 8, kAheadExtra);
  sched_->add(2, {4, 5, 6}, 8, kAheadExtra);
  StepPlan n0 = schedule();
  update(n0, 30);
  sched_->finish(1);  // e.g. EOS sampled at n0
  StepPlan n1 = schedule();
  ASSERT_EQ(n1.seqs.size(), 1u);
  EXPECT_EQ(n1.seqs[0].key, 2);
}

TEST_F(SchedulerAheadTest, FinishedAfterTheNextPlanIsDroppedOrDiscarded) {
  for (bool resolve : {true, false}) {
    SCOPED_TRACE(resolve ? "resolve_plan" : "no resolve_plan");
    init(64);
    sched_->add(1, {1, 2, 3}, 8, kAheadExtra);
    sched_->add(2, {4, 5, 6}, 8, kAheadExtra);
    StepPlan n0 = schedule();
    StepPlan n1 = schedule();  // contains request 1 with a placeholder
    ASSERT_EQ(n1.seqs.size(), 2u);
    update(n0, 30);
    sched_->finish(1);
    EXPECT_EQ(kv_->block_table(1).size(), 0u);  // blocks freed at once
    if (resolve) {
      sched_->resolve_plan(&n1);
      ASSERT_EQ(n1.seqs.size(), 1u);
      EXPECT_EQ(n1.seqs[0].key, 2);
      EXPECT_EQ(n1.seqs[0].tokens, (Tokens{30}));
    }
    // The engine ran n1 (with or without request 1); request 1's result, if any, is discarded.
    update(n1, 31);
    EXPECT_EQ(sched_->find(1), nullptr);
    EXPECT_EQ(sched_->find(2)->tokens, (Tokens{4, 5, 6, 30, 31}));
    StepPlan n2 = schedule();
    ASSERT_EQ(n2.seqs.size(), 1u);
    EXPECT_EQ(n2.seqs[0].key, 2);
  }
}

TEST_F(SchedulerAheadTest, AbortWhileTwoPlansAreInFlight) {
  sched_->add(1, {1, 2, 3, 4, 5}, 8, kAheadExtra);
  StepPlan n0 = schedule();
  StepPlan n1 = schedule();
  sched_->abort(1);
  EXPECT_EQ(kv_->num_free_blocks(), kv_->num_blocks());
  update(n0, 7);
  sched_->resolve_plan(&n1);
  EXPECT_TRUE(n1.empty());
  update(n1, 8);
  EXPECT_FALSE(sched_->has_requests());
  EXPECT_TRUE(sched_->check_invariants().ok());
}

// Request 2 decodes with a sample in flight when request 1 needs its blocks: request 2 is
// preempted, its in-flight token is kept, and it is re-admitted only after that token is known.
TEST_F(SchedulerAheadTest, PreemptedWithASampleInFlightKeepsTheToken) {
  init(/*num_blocks=*/4);
  sched_->add(1, {1, 2, 3, 4, 5, 6, 7}, 8, kAheadExtra);  // 2 blocks, decodes at position 7, 8, ...
  sched_->add(2, {8, 9, 10, 11, 12, 13, 14}, 8, kAheadExtra);
  StepPlan n0 = schedule();
  ASSERT_EQ(n0.seqs.size(), 2u);
  update(n0, 40);
  // n1: both decode at position 7 (last row of block 2 each).
  StepPlan n1 = schedule();
  ASSERT_EQ(n1.seqs.size(), 2u);
  // n2 (ahead of update(n1)): position 8 needs a third block each; none is free, so request 2
  // (the newest) is preempted for request 1.
  StepPlan n2 = schedule();
  EXPECT_EQ(n2.preempted, (std::vector<RequestKey>{2}));
  ASSERT_EQ(n2.seqs.size(), 1u);
  EXPECT_EQ(n2.seqs[0].key, 1);
  const RequestState* r2 = sched_->find(2);
  EXPECT_EQ(r2->phase, RequestPhase::kWaiting);
  EXPECT_EQ(r2->num_pending_samples, 1);
  EXPECT_EQ(sched_->num_preemptions(), 1);
  // n1's result for request 2 is still valid and kept.
  update(n1, 41);
  EXPECT_EQ(r2->tokens, (Tokens{8, 9, 10, 11, 12, 13, 14, 40, 41}));
  EXPECT_EQ(r2->num_pending_samples, 0);
  EXPECT_EQ(r2->num_computed, 0);
  sched_->resolve_plan(&n2);
  EXPECT_EQ(n2.seqs[0].tokens, (Tokens{41}));
  update(n2, 42);
  // Request 2 needs 3 blocks for its 9 tokens; 1 is free while request 1 runs: it waits.
  StepPlan n3 = schedule();
  ASSERT_EQ(n3.seqs.size(), 1u);
  EXPECT_EQ(n3.seqs[0].key, 1);
  update(n3, 43);
  sched_->finish(1);
  StepPlan n4 = schedule();
  ASSERT_EQ(n4.seqs.size(), 1u);
  EXPECT_EQ(n4.seqs[0].key, 2);
  EXPECT_EQ(n4.seqs[0].start_pos, 4);  // its first block is still in the prefix cache
  EXPECT_EQ(n4.seqs[0].num_tokens, 5);
  EXPECT_TRUE(n4.seqs[0].samples);
  EXPECT_EQ(n4.seqs[0].block_table.size(), 3u);
}

TEST(SchedulerAheadDeathTest, UpdateOutOfOrderAborts) {
  kv::KvCacheManager kv(kv::KvCacheConfig{8, 4, true});
  Scheduler sched(SchedulerConfig{4, 16, 8, 0}, &kv);
  sched.add(1, {1, 2}, 4, kAheadExtra);
  const StepPlan n0 = sched.schedule();
  const StepPlan n1 = sched.schedule();
  EXPECT_DEATH(sched.update(n1, {}), "in the order");
  (void)n0;
}

// A long prefill (more than two steps' budget left) leaves --long-prefill-reserve tokens of each
// step: a short request that arrives while step N computes joins plan N+1, made ahead, instead of
// waiting for the whole long prompt; with no reserve it cannot.
TEST_F(SchedulerAheadTest, ALongPrefillLeavesItsReserveToARequestThatArrivesMeanwhile) {
  for (const int32_t reserve : {-1, 0}) {
    SchedulerConfig sc = sc_;
    sc.long_prefill_reserve = reserve;
    ASSERT_TRUE(sc.validate().ok());
    kv_ = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{256, 4, true});
    sched_ = std::make_unique<Scheduler>(sc, kv_.get());
    const int32_t budget = sc.max_batched_tokens, chunk = reserve < 0 ? budget * 3 / 4 : budget;
    sched_->add(1, Tokens(5 * budget, 3), 4, kAheadExtra);
    StepPlan n0 = sched_->schedule();
    StepPlan n1 = sched_->schedule();  // made ahead, before the short request arrives
    ASSERT_EQ(n0.seqs.size(), 1u);
    EXPECT_EQ(n0.seqs[0].num_tokens, budget);  // admitted: its first chunk takes the step
    ASSERT_EQ(n1.seqs.size(), 1u);
    EXPECT_EQ(n1.seqs[0].num_tokens, chunk) << reserve;  // running: it leaves the reserve
    sched_->add(2, Tokens(budget / 8, 9), 4, kAheadExtra);
    update(n0, 99);
    sched_->resolve_plan(&n1);
    sched_->extend_plan(&n1);
    testing::expect_valid_plan(n1, sc, 4);
    if (reserve < 0) {
      ASSERT_EQ(n1.seqs.size(), 2u);
      EXPECT_EQ(n1.seqs[1].key, 2);
      EXPECT_EQ(n1.seqs[1].num_tokens, budget / 8);  // its whole prompt: it samples next
      EXPECT_TRUE(n1.seqs[1].samples);
    } else {
      EXPECT_EQ(n1.seqs.size(), 1u);  // the long prompt took the whole step
    }
    update(n1, 98);
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  }
  // The reserve must leave room for the long prompt.
  SchedulerConfig bad = sc_;
  bad.long_prefill_reserve = bad.max_batched_tokens;
  EXPECT_EQ(bad.validate().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace keel::engine
