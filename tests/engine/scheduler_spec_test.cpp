// Scheduler speculative-decoding tests with hand-made model outputs: a speculating decode carries
// the n-gram drafts and reserves their slots; update() keeps the emitted tokens, counts only the
// accepted positions as computed, shrinks the block table (blocks freed) and never publishes a
// rejected token in the prefix cache; drafts respect max_tokens and never preempt; a plan made
// ahead leaves a speculating request out until its last token is known, and extend_plan() adds it.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/scheduler.h"
#include "sim_util.h"

namespace keel::engine {
namespace {

using Tokens = std::vector<int32_t>;

const kv::BlockHash kSpecExtra = kv::request_extra_key(kv::BlockHash{5, 6}, "");
const SpeculativeParams kNgram4{SpecMethod::kNgram, 4, 3, 1};

class SchedulerSpecTest : public ::testing::Test {
 protected:
  void SetUp() override { init(64); }
  void init(int32_t num_blocks) {
    sc_ = SchedulerConfig{8, 64, 256, 0};
    kv_ = std::make_unique<kv::KvCacheManager>(kv::KvCacheConfig{num_blocks, 4, true});
    sched_ = std::make_unique<Scheduler>(sc_, kv_.get());
  }
  StepPlan schedule() {
    StepPlan plan = sched_->schedule();
    testing::expect_valid_plan(plan, sc_, 4);
    check();
    return plan;
  }
  void check() {
    EXPECT_TRUE(sched_->check_invariants().ok()) << sched_->check_invariants().to_string();
  }
  // Prefills request 1 (prompt `prompt`, speculating) and samples `first` after it.
  void prefill(const Tokens& prompt, int32_t first, int32_t max_tokens = 16) {
    sched_->add(1, prompt, max_tokens, kSpecExtra);
    sched_->set_speculation(1, kNgram4);
    StepPlan p = schedule();
    ASSERT_EQ(p.seqs.size(), 1u);
    ASSERT_EQ(p.seqs[0].num_drafts, 0);
    sched_->update(p, std::vector<SeqResult>{{1, first}});
    check();
  }
  const RequestState& r() { return *sched_->find(1); }

  SchedulerConfig sc_;
  std::unique_ptr<kv::KvCacheManager> kv_;
  std::unique_ptr<Scheduler> sched_;
};

TEST_F(SchedulerSpecTest, RejectedDraftsAreRolledBackAndNeverPublished) {
  // Tokens 5 6 7 8 9 5 6 7 | 8: the last 3 (6 7 8) occurred at 1, followed by 9 5 6 7.
  prefill({5, 6, 7, 8, 9, 5, 6, 7}, 8);
  const int32_t free_before = kv_->num_free_blocks();
  StepPlan p = schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  const ScheduledSeq& s = p.seqs[0];
  EXPECT_EQ(s.num_drafts, 4);
  EXPECT_EQ(s.start_pos, 8);
  EXPECT_EQ(s.tokens, (Tokens{8, 9, 5, 6, 7}));
  EXPECT_TRUE(s.samples);
  EXPECT_EQ(kv_->block_table(1).size(), 4u);  // positions 0..12
  EXPECT_EQ(kv_->num_free_blocks(), free_before - 2);
  // The model accepts the first draft (9) and corrects the second (42).
  sched_->update(p, std::vector<SeqResult>{{1, 9}, {1, 42}});
  check();
  EXPECT_EQ(r().tokens, (Tokens{5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 42}));
  EXPECT_EQ(r().num_computed, 10);  // the last known token 8 and the accepted 9
  EXPECT_EQ(r().num_scheduled, 10);
  EXPECT_EQ(kv_->block_table(1).size(), 3u);  // the block of positions 12..15 is freed
  EXPECT_EQ(kv_->num_free_blocks(), free_before - 1);

  // Next: the last 3 tokens (8 9 42) never occurred, nor (9 42) or (42): a plain decode.
  p = schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_drafts, 0);
  EXPECT_EQ(p.seqs[0].tokens, Tokens{42});
  sched_->update(p, std::vector<SeqResult>{{1, 3}});
  check();
  p = schedule();  // computes position 11 (token 3)
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].start_pos, 11);
  sched_->update(p, std::vector<SeqResult>{{1, 0}});
  check();
  // Positions 8..11 (8 9 42 3) are computed: that block is published with the accepted tokens,
  // and no chain holding the rejected drafts (5 6 at positions 10, 11) is found.
  const Tokens accepted = {5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 42, 3, 0};
  const Tokens rejected = {5, 6, 7, 8, 9, 5, 6, 7, 8, 9, 5, 6, 0};
  EXPECT_EQ(kv_->lookup_prefix(accepted, kSpecExtra).num_tokens, 12);
  EXPECT_EQ(kv_->lookup_prefix(rejected, kSpecExtra).num_tokens, 8);
}

TEST_F(SchedulerSpecTest, EveryDraftAcceptedEmitsTheBonusToken) {
  prefill({5, 6, 7, 8, 9, 5, 6, 7}, 8);
  StepPlan p = schedule();
  ASSERT_EQ(p.seqs[0].num_drafts, 4);
  sched_->update(p, std::vector<SeqResult>{{1, 9}, {1, 5}, {1, 6}, {1, 7}, {1, 8}});
  check();
  EXPECT_EQ(r().num_tokens(), 14);
  EXPECT_EQ(r().num_computed, 13);
  EXPECT_EQ(kv_->block_table(1).size(), 4u);
  // None accepted: one token, the table back to what position 8 needs.
  p = schedule();
  ASSERT_GT(p.seqs[0].num_drafts, 0);
  sched_->update(p, std::vector<SeqResult>{{1, 77}});
  check();
  EXPECT_EQ(r().num_computed, 14);
  EXPECT_EQ(r().num_tokens(), 15);
  EXPECT_EQ(kv_->block_table(1).size(), 4u);  // positions 0..13
}

TEST_F(SchedulerSpecTest, DraftsRespectMaxTokens) {
  prefill({5, 6, 7, 8, 9, 5, 6, 7}, 8, /*max_tokens=*/3);  // 1 generated, 2 left
  StepPlan p = schedule();
  ASSERT_EQ(p.seqs.size(), 1u);
  EXPECT_EQ(p.seqs[0].num_drafts, 1);  // accepted + 1 ≤ 2
  sched_->update(p, std::vector<SeqResult>{{1, 9}, {1, 5}});
  check();
  EXPECT_EQ(r().num_generated(), 3);
  EXPECT_TRUE(schedule().empty());  // complete: the caller finishes it
}

TEST_F(SchedulerSpecTest, DraftsNeverPreemptAndShrinkToTheFreeBlocks) {
  init(4);  // 16 positions in all
  sched_->add(1, {5, 6, 7, 8, 9, 5, 6, 7}, 8, kSpecExtra);
  sched_->set_speculation(1, kNgram4);
  sched_->add(2, {1, 2, 3}, 2, kSpecExtra);  // one block, admitted after request 1
  StepPlan p = schedule();
  ASSERT_EQ(p.seqs.size(), 2u);
  sched_->update(p, std::vector<SeqResult>{{1, 8}, {2, 4}});
  check();
  EXPECT_EQ(kv_->num_free_blocks(), 1);
  p = schedule();
  ASSERT_EQ(p.seqs.size(), 2u);
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_EQ(p.seqs[0].key, 1);
  EXPECT_EQ(p.seqs[0].num_drafts, 3);  // positions 8..11: the one free block, not request 2's
  EXPECT_EQ(p.seqs[1].key, 2);
  EXPECT_EQ(kv_->num_free_blocks(), 0);
  sched_->update(p, std::vector<SeqResult>{{1, 1}, {2, 5}});
  check();
  EXPECT_EQ(kv_->num_free_blocks(), 0);  // position 8 keeps the third block
}

TEST_F(SchedulerSpecTest, PlansMadeAheadWaitForTheLastTokenThenExtendAddsTheDrafts) {
  sched_->add(1, {5, 6, 7, 8, 9, 5, 6, 7}, 16, kSpecExtra);
  sched_->set_speculation(1, kNgram4);
  sched_->add(2, {1, 2, 3}, 16, kSpecExtra);  // not speculating: decodes ahead as usual
  StepPlan n0 = schedule();
  ASSERT_EQ(n0.seqs.size(), 2u);
  StepPlan n1 = schedule();  // made ahead: request 1's sampled token is unknown
  ASSERT_EQ(n1.seqs.size(), 1u);
  EXPECT_EQ(n1.seqs[0].key, 2);
  sched_->update(n0, std::vector<SeqResult>{{1, 8}, {2, 4}});
  sched_->resolve_plan(&n1);
  sched_->extend_plan(&n1);
  testing::expect_valid_plan(n1, sc_, 4);
  check();
  ASSERT_EQ(n1.seqs.size(), 2u);
  EXPECT_EQ(n1.seqs[1].key, 1);
  EXPECT_EQ(n1.seqs[1].num_drafts, 4);
  StepPlan n2 = schedule();  // ahead again: request 1 verifies in n1, so it waits
  ASSERT_EQ(n2.seqs.size(), 1u);
  EXPECT_EQ(n2.seqs[0].key, 2);
  sched_->update(n1, std::vector<SeqResult>{{2, 4}, {1, 9}, {1, 5}, {1, 0}});
  check();
  EXPECT_EQ(sched_->find(1)->num_computed, 11);
  sched_->resolve_plan(&n2);
  sched_->extend_plan(&n2);
  check();
  ASSERT_EQ(n2.seqs.size(), 2u);
  EXPECT_EQ(n2.seqs[1].key, 1);
  EXPECT_EQ(n2.seqs[1].start_pos, 11);
}

}  // namespace
}  // namespace keel::engine
